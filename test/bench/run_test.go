package bench

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/benchkit"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// result is one measured load: how many operations ended in how long, and
// each one's latency.
type result struct {
	ops     int
	elapsed time.Duration
	lat     []time.Duration
	cpu     []time.Duration // of the processes watched (watch), in order
	busy    time.Duration   // the whole machine's, kernel threads included (watch)
}

func (r result) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.ops) / r.elapsed.Seconds()
}

// pct is the p-th percentile latency (0 < p ≤ 100), nearest rank.
func (r result) pct(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	s := slices.Clone(r.lat)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func (r result) merge(o result) result {
	cpu := slices.Clone(o.cpu)
	for i := range min(len(r.cpu), len(cpu)) {
		cpu[i] += r.cpu[i]
	}
	return result{ops: r.ops + o.ops, elapsed: r.elapsed + o.elapsed, lat: append(r.lat, o.lat...), cpu: cpu, busy: r.busy + o.busy}
}

// cpuPerOp is the i-th watched process's CPU time per operation.
func (r result) cpuPerOp(i int) time.Duration {
	if i >= len(r.cpu) || r.ops == 0 {
		return 0
	}
	return r.cpu[i] / time.Duration(r.ops)
}

// watch makes a load also record the CPU time the processes pids spend
// while it runs, and the whole machine's: where a load keeps about every
// core busy, CPU is its ceiling, and these say whose.
func watch(t testing.TB, pids []int, load func(time.Duration) result) func(time.Duration) result {
	return func(d time.Duration) result {
		before := make([]time.Duration, len(pids))
		for i, p := range pids {
			before[i] = benchkit.CPUTime(t, p)
		}
		busy := machineBusy(t)
		r := load(d)
		r.busy = machineBusy(t) - busy
		r.cpu = make([]time.Duration, len(pids))
		for i, p := range pids {
			r.cpu[i] = benchkit.CPUTime(t, p) - before[i]
		}
		return r
	}
}

// machineBusy is the CPU time all cores spent on anything but idling and
// waiting for I/O so far, from /proc/stat's first line (in the same clock
// ticks as cpuTime).
func machineBusy(t testing.TB) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // "cpu" user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		t.Fatalf("/proc/stat: %q", line)
	}
	var ticks int64
	for i, v := range f[1:9] {
		if i == 3 || i == 4 {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// cores is how many cores r's load kept busy on average: the machine's
// with no procs, else the watched processes' at those positions.
func (r result) cores(procs ...int) float64 {
	if r.elapsed <= 0 {
		return 0
	}
	d := r.busy
	if len(procs) > 0 {
		d = 0
		for _, i := range procs {
			if i < len(r.cpu) {
				d += r.cpu[i]
			}
		}
	}
	return d.Seconds() / r.elapsed.Seconds()
}

// closedLoop is benchkit.ClosedLoop as a result.
func closedLoop(t testing.TB, clients int, d time.Duration, fn func(client int) error) result {
	t.Helper()
	lat, elapsed := benchkit.ClosedLoop(t, clients, d, fn)
	return result{ops: len(lat), elapsed: elapsed, lat: lat}
}

// counted runs n calls of fn (numbered 0..n-1) over clients goroutines.
func counted(t testing.TB, clients, n int, fn func(i int) error) result {
	t.Helper()
	var next atomic.Int64
	var failed atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for failed.Load() == nil {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if err := fn(int(i)); err != nil {
					failed.Store(err)
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	return result{ops: n, elapsed: time.Since(start)}
}

// abba measures each load for d in all, in the order given and then in
// reverse, half of d each time, after a short warm-up of each: a drift in
// the machine's other load (2 cores shared) then falls on every load
// alike rather than on whichever ran last.
func abba(t testing.TB, d time.Duration, loads ...func(time.Duration) result) []result {
	t.Helper()
	for _, l := range loads {
		l(d / 10)
	}
	out := make([]result, len(loads))
	for i, l := range loads {
		out[i] = l(d / 2)
	}
	for i := len(loads) - 1; i >= 0; i-- {
		out[i] = out[i].merge(loads[i](d / 2))
	}
	return out
}

// api is a tenant key on a server, with one HTTPS client shared by every
// benchmark client, as s3sig's one client is shared by the raw loads.
type api struct {
	e      *testenv.Env
	token  string
	client *http.Client
}

func newAPI(e *testenv.Env, token string) *api {
	return &api{e: e, token: token, client: e.HTTPClient()}
}

// do sends one request and reads its answer to the end.
func (a *api) do(method, path string, body []byte, want int) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, a.e.BaseURL+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/vcon")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d, want %d: %.200s", method, path, resp.StatusCode, want, b)
	}
	return nil
}

// procStatus reads a field of /proc/<pid>/status in bytes (VmRSS, VmHWM).
func procStatus(t testing.TB, pid int, field string) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb * 1024
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// nextPhase is the server for the next row. With CPU profiles on, it is a
// new process, so that each row has a profile of its own, once its look
// at every object at start is over (the look is in no row's figure);
// without, it is p, still running: a restart would add that look.
func nextPhase(t testing.TB, e *testenv.Env, p *testenv.Proc, name string) *testenv.Proc {
	t.Helper()
	if testenv.CPUProfileDir() == "" {
		return p
	}
	p.Stop()
	looks := countLog(t, p.Log, "storage look")
	np := e.StartProfiled(name)
	waitLog(t, np.Log, "storage look", looks+1, 10*time.Minute)
	return np
}

// countLog counts the lines of a server's log that hold s.
func countLog(t testing.TB, path, s string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), s)
}

// waitLog waits until the log holds s n times; it returns the log.
func waitLog(t testing.TB, path, s string, n int, limit time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Count(string(b), s) >= n {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %d lines %q in %s:\n%s", limit, n, s, path, tail(b))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tail(b []byte) []byte {
	if len(b) > 4000 {
		return b[len(b)-4000:]
	}
	return b
}

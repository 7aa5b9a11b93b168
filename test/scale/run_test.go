package scale

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/benchkit"
)

// site is one size's configuration, data directory and binary.
type site struct {
	t      *testing.T
	bin    string
	dir    string
	config string
	listen string
	client *http.Client
}

// writeConfig writes the configuration with the given purge interval in
// seconds; the log at debug level shows when the look at every object ends.
func (s *site) writeConfig(purgeInterval int) {
	text := fmt.Sprintf(`listen = %q
data_dir = "data"
master_key = "master.key"
max_vcon_size = "64MiB"

[tls]
cert = "cert.pem"
key = "key.pem"

[retention]
default = "30d"
purge_interval = %d

[log]
level = "debug"
`, s.listen, purgeInterval)
	if err := os.WriteFile(s.config, []byte(text), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

func (s *site) dataDir() string   { return filepath.Join(s.dir, "data") }
func (s *site) masterKey() string { return filepath.Join(s.dir, "master.key") }

// run is one finished run of the binary: its wall time from start to exit
// and its peak RSS (benchkit.WatchPeakRSS).
type run struct {
	out    []byte
	wall   time.Duration
	rssKiB int64
}

func (r run) rssMiB() float64 { return float64(r.rssKiB) / 1024 }

// cli runs the binary with the site's configuration and fails the test on
// a non-zero exit.
func (s *site) cli(args ...string) run {
	s.t.Helper()
	cmd := exec.Command(s.bin, append(args, "--config", s.config)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Start()
	peak := func() float64 { return 0 }
	if err == nil {
		peak = benchkit.WatchPeakRSS(cmd.Process.Pid)
		err = cmd.Wait()
	}
	wall := time.Since(start)
	rss := peak()
	if err != nil {
		s.t.Fatalf("vcon-server %s: %v\n%s\n%s", strings.Join(args, " "), err, errOut.Bytes(), tail(out.Bytes()))
	}
	return run{out: out.Bytes(), wall: wall, rssKiB: int64(rss / 1024)}
}

// tail is the end of a long output, for a failure message.
func tail(b []byte) []byte {
	if len(b) > 4000 {
		return b[len(b)-4000:]
	}
	return b
}

// jsonOf decodes one JSON line of the binary's output.
func (s *site) jsonOf(line []byte, v any) {
	s.t.Helper()
	if err := json.Unmarshal(bytes.TrimSpace(line), v); err != nil {
		s.t.Fatalf("decode %q: %v", line, err)
	}
}

// httpClient trusts the certificate init made for localhost.
func (s *site) httpClient() *http.Client {
	pem, err := os.ReadFile(filepath.Join(s.dir, "cert.pem"))
	if err != nil {
		s.t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}, MaxIdleConnsPerHost: 4,
	}}
}

// server is the binary serving, started by serve.
type server struct {
	s       *site
	cmd     *exec.Cmd
	log     string
	started time.Time     // just before the process was started
	health  time.Duration // from started to the first 200 of /health
	done    chan struct{}
	peak    func() float64 // benchkit.WatchPeakRSS
}

// serve starts `vcon-server serve` and waits for the first 200 of
// /health, polling every 5 ms from the moment the process starts.
func (s *site) serve(name string) *server {
	s.t.Helper()
	p := &server{s: s, log: filepath.Join(s.dir, name+".log"), done: make(chan struct{})}
	logf, err := os.Create(p.log)
	if err != nil {
		s.t.Fatal(err)
	}
	p.cmd = exec.Command(s.bin, "serve", "--config", s.config)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	probe := &http.Client{Timeout: time.Second, Transport: s.client.Transport}
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	p.peak = benchkit.WatchPeakRSS(p.cmd.Process.Pid)
	go func() { p.cmd.Wait(); logf.Close(); close(p.done) }()
	s.t.Cleanup(func() {
		if !p.exited() {
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	for time.Since(p.started) < 30*time.Minute {
		if p.exited() {
			b, _ := os.ReadFile(p.log)
			s.t.Fatalf("serve exited at start:\n%s", tail(b))
		}
		resp, err := probe.Get("https://" + s.listen + "/health")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				p.health = time.Since(p.started)
				return p
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.t.Fatal("serve did not answer /health in 30 minutes")
	return nil
}

func (p *server) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, waits for the exit and returns the peak RSS in KiB.
func (p *server) stop() int64 {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Minute):
		p.s.t.Fatal("serve did not stop in 5 minutes after SIGTERM")
	}
	return int64(p.peak() / 1024)
}

// waitLog waits until a line of the server's log holds every one of the
// words, and returns the time since the process started and the line.
func (p *server) waitLog(limit time.Duration, words ...string) (time.Duration, string) {
	p.s.t.Helper()
	for time.Since(p.started) < limit {
		b, _ := os.ReadFile(p.log)
		for _, line := range strings.Split(string(b), "\n") {
			all := true
			for _, w := range words {
				all = all && strings.Contains(line, w)
			}
			if all {
				return time.Since(p.started), line
			}
		}
		if p.exited() {
			p.s.t.Fatalf("serve exited:\n%s", tail(b))
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, _ := os.ReadFile(p.log)
	p.s.t.Fatalf("no log line with %q in %s:\n%s", words, limit, tail(b))
	return 0, ""
}

// field is the value of key=value in a log line, -1 when absent.
func field(line, key string) int {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return -1
}

// loadAvg is the machine's load average over the last minute, as text.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// do sends one request with a token and returns the status and body.
func (p *server) do(method, path, token string, body []byte) (int, []byte) {
	p.s.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, "https://"+p.s.listen+path, rd)
	if err != nil {
		p.s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.s.client.Do(req)
	if err != nil {
		p.s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		p.s.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// list pages through GET /vcons of one tenant to the end, 1000 a page,
// and returns how many uuids it got and how long it took.
func (p *server) list(token string) (int, time.Duration) {
	p.s.t.Helper()
	start := time.Now()
	n, after := 0, ""
	for {
		path := "/vcons?limit=1000"
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		status, b := p.do("GET", path, token, nil)
		if status != 200 {
			p.s.t.Fatalf("GET %s: %d %s", path, status, b)
		}
		var page struct {
			UUIDs []string `json:"uuids"`
			Next  *string  `json:"next"`
		}
		p.s.jsonOf(b, &page)
		n += len(page.UUIDs)
		if page.Next == nil {
			return n, time.Since(start)
		}
		after = *page.Next
	}
}

// metric reads one sample of /metrics: the value of the line that starts
// with name (labels included), 0 when absent.
func (p *server) metric(token string, names ...string) []float64 {
	p.s.t.Helper()
	status, b := p.do("GET", "/metrics", token, nil)
	if status != 200 {
		p.s.t.Fatalf("GET /metrics: %d %s", status, b)
	}
	out := make([]float64, len(names))
	for _, line := range strings.Split(string(b), "\n") {
		for i, name := range names {
			if rest, ok := strings.CutPrefix(line, name+" "); ok {
				out[i], _ = strconv.ParseFloat(strings.TrimSpace(rest), 64)
			}
		}
	}
	return out
}

const (
	metricSweeps = `vcon_purge_sweeps_total{outcome="ok"}`
	metricPurges = `vcon_purges_total`
)

// sweep measures one purge sweep of the running server, whose
// purge_interval is interval: it learns when the sweeps tick from the
// sweep counter, sets every tenant's retention to 0d over the admin API
// right after one tick, and times the next sweep from its tick to the
// counter's next step. It returns the sweep's duration and how many keys
// it destroyed. The error is about the polling interval (20 ms) plus the
// duration of an empty sweep.
func (p *server) sweep(ops string, tenants []string, interval time.Duration) (time.Duration, int) {
	p.s.t.Helper()
	const poll = 20 * time.Millisecond
	v := p.metric(ops, metricSweeps, metricPurges)
	s0, purged0 := v[0], v[1]
	var tick time.Time // when the counter stepped: just after a tick
	for limit := time.Now().Add(3 * interval); ; time.Sleep(poll) {
		if time.Now().After(limit) {
			p.s.t.Fatalf("no purge sweep ran in %s", 3*interval)
		}
		if v := p.metric(ops, metricSweeps); v[0] > s0 {
			s0, tick = v[0], time.Now()
			break
		}
	}
	for _, id := range tenants {
		if status, b := p.do("PUT", "/admin/tenants/"+id+"/retention", ops, []byte(`{"retention":"0d"}`)); status != 200 {
			p.s.t.Fatalf("PUT retention: %d %s", status, b)
		}
	}
	if late := time.Since(tick); late > interval/2 {
		p.s.t.Fatalf("setting the retention took %s, too close to the next sweep's tick (interval %s)", late, interval)
	}
	next := tick.Add(interval)
	for {
		time.Sleep(poll)
		v := p.metric(ops, metricSweeps, metricPurges)
		if v[0] > s0 {
			return time.Since(next), int(v[1] - purged0)
		}
		if p.exited() {
			p.s.t.Fatal("serve exited during the sweep")
		}
	}
}

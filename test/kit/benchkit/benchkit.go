// Package benchkit holds what more than one benchmark package needs: the
// 4 KiB vCon they store, the closed loop of clients that runs a load, the
// disk's floor for a durable small file, and a child process's peak RSS
// and CPU time.
package benchkit

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
)

// Vcon4K is an unsigned vCon of 4096 bytes.
func Vcon4K(uuid string) []byte {
	body := apitest.NewVcon(uuid, "benchmark", "+15555550100")
	pad := 4096 - len(body) - len(`,"pad":""`)
	return append(body[:len(body)-1], []byte(`,"pad":"`+strings.Repeat("x", pad)+`"}`)...)
}

// ClosedLoop runs fn from clients goroutines, each calling again as soon
// as its call returns, for d, and returns every call's latency and the
// time all of them took. The first call that fails stops every client and
// fails the test.
func ClosedLoop(t testing.TB, clients int, d time.Duration, fn func(client int) error) ([]time.Duration, time.Duration) {
	t.Helper()
	var mu sync.Mutex
	var all []time.Duration
	var failed atomic.Value
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			var lat []time.Duration
			for time.Now().Before(deadline) && failed.Load() == nil {
				s := time.Now()
				if err := fn(c); err != nil {
					failed.Store(err)
					break
				}
				lat = append(lat, time.Since(s))
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}(c)
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	return all, elapsed
}

// WriteDurable writes body as a new file in dir with the steps the data
// directory takes for an object (a temporary file, fsync, rename, then an
// fsync of the directory d, which is dir opened): the disk's floor for a
// store, with no server around it.
func WriteDurable(d *os.File, dir string, body []byte) error {
	name := filepath.Join(dir, ids.NewRandom().String())
	f, err := os.OpenFile(name+".tmp", os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(body); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(name+".tmp", name); err != nil {
		return err
	}
	return d.Sync()
}

// WatchPeakRSS reads a child process's VmHWM every few milliseconds until
// it exits; the returned func stops and gives the last value read, in
// bytes. A child's rusage would not do: Linux carries the high-water mark
// of the memory an exec replaces into ru_maxrss, and Go starts a child
// sharing its parent's memory until the exec, so ru_maxrss reports the
// test process's own resident memory whenever that is the larger.
func WatchPeakRSS(pid int) func() float64 {
	var peak float64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		path := fmt.Sprintf("/proc/%d/status", pid)
		for {
			if b, err := os.ReadFile(path); err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
						kb, _ := strconv.ParseFloat(f[1], 64)
						peak = max(peak, kb*1024)
					}
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() float64 {
		close(stop)
		<-done
		return peak
	}
}

// CPUTime is a process's user and system CPU time so far, from
// /proc/<pid>/stat (utime and stime, in clock ticks of 1/100 s, which is
// what Linux reports to user space on every common configuration).
func CPUTime(t testing.TB, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name, in parentheses, may hold spaces: count from the
	// last ")". utime and stime are the 14th and 15th fields.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

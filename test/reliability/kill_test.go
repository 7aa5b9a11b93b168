package reliability

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/load"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestKillsUnderLoad runs the real binary under the load generator and
// kills it with SIGKILL at random moments, restarting it each time, while
// stores, replaces, deletes and purges are in flight. Requests cut by a
// kill fail; every one the server acknowledged must read back after the
// last restart, and check --deep must be clean. VCON_SOAK makes it run
// that long, with a kill every few seconds.
func TestKillsUnderLoad(t *testing.T) {
	d, long := soak(t, 5*time.Second)
	e := testenv.Prepare(t, testenv.Options{Listen: testenv.FreePort(t)})
	ts := tenants(e, 6)
	p := e.StartBinary()
	every := 1200 * time.Millisecond
	if long {
		every = 4 * time.Second
	}

	restarted := make(chan struct{})
	type result struct {
		rep load.Report
		err error
	}
	done := make(chan result, 1)
	// The port is fixed: every restart serves the same URL. StartBinary
	// rewrites e's fields, so the load goroutine reads none of them.
	client, url, ca := e.HTTPClient(), e.BaseURL, certPEM(t, e)
	go func() {
		rep, err := load.Run(t.Context(), load.Config{
			URL: url, CAPEM: ca, Tenants: ts, Workers: 12, Duration: d, MaxBody: 16 << 10,
			Faulty: true, Client: client,
			BeforeVerify: func() string {
				<-restarted
				return url
			},
		})
		done <- result{rep, err}
	}()

	kills := 0
	end := time.Now().Add(d)
	for time.Now().Add(every).Before(end) {
		time.Sleep(every/2 + rand.N(every))
		p.Kill()
		kills++
		p = e.StartBinary()
	}
	close(restarted)
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	rep := res.rep
	t.Logf("load: %s", rep.Summary())
	t.Logf("soak figures: requests=%d kills_survived=%d failed_cleanly=%d versions_acked=%d verified=%d lost=%d",
		rep.Requests, kills, rep.Failed, rep.VersionsAcked, rep.Verified, rep.Lost)
	if rep.Errors != 0 || rep.Lost != 0 {
		if b, err := os.ReadFile(filepath.Join(e.Dir, "serve.log")); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, "recovery") || strings.Contains(l, "ERROR") || strings.Contains(l, "WARN") {
					t.Log(l)
				}
			}
		}
		t.Fatalf("%d errors, %d lost: %v", rep.Errors, rep.Lost, rep.FirstErrors)
	}
	if kills < 2 || rep.VersionsAcked == 0 {
		t.Fatalf("%d kills, %d versions acknowledged: the run proved little", kills, rep.VersionsAcked)
	}
	p.Stop()
	checkClean(t, e)
}

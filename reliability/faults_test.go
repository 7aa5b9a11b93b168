package reliability

import (
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/apitest"
	"github.com/vcon-server/vcon-server/internal/testenv"
	"github.com/vcon-server/vcon-server/scripts/loadgen/load"
)

// TestHTTPSuiteThroughFaults runs the whole HTTP suite with its objects in
// versitygw behind the fault proxy, which breaks about one S3 request in
// twelve in ways the client's retries absorb (503, 500, resets, answers
// dropped after the bucket did the work, delays): every test of the suite
// must pass as it does on a healthy bucket.
func TestHTTPSuiteThroughFaults(t *testing.T) {
	p := startProxied(t)
	if err := p.proxy.SetRules(absorbable(0.02)...); err != nil {
		t.Fatal(err)
	}
	apitest.Run(t, func(t *testing.T, opts testenv.Options) *testenv.Env {
		opts.Storage = p.storageTOML(t, p.srv.NewBucket(t, false), "suite/")
		return testenv.New(t, opts)
	})
	st := p.proxy.Stats()
	t.Logf("fault proxy: %s", st)
	if st.Total() < 10 {
		t.Errorf("only %d faults in the whole suite: it proved little", st.Total())
	}
}

// TestLoadThroughFaults runs the load generator while the proxy breaks
// S3 requests at a high rate, bodies cut after their headers included, so
// that some requests to the server fail. Every answer must be a success or
// a clean failure (5xx, or a cut connection for a read whose object broke
// mid-stream); then the faults stop, the server restarts, every
// acknowledged version reads back byte-identical (deleted ones 404) and
// check --deep finds nothing wrong. VCON_SOAK makes it run that long.
func TestLoadThroughFaults(t *testing.T) {
	d, long := soak(t, 4*time.Second)
	p := startProxied(t)
	e := testenv.New(t, testenv.Options{Storage: p.storageTOML(t, p.srv.NewBucket(t, false), "faults/")})
	ts := tenants(e, 6)
	rate := 0.08
	if long {
		rate = 0.04
	}
	if err := p.proxy.SetRules(harsh(rate)...); err != nil {
		t.Fatal(err)
	}
	rep := runLoad(t, load.Config{
		URL: e.BaseURL, CAPEM: certPEM(t, e), Tenants: ts, Workers: 12, Duration: d, MaxBody: 24 << 10, Faulty: true,
		BeforeVerify: func() string {
			p.proxy.Clear()
			e.Restart()
			return e.BaseURL
		},
	})
	st := p.proxy.Stats()
	t.Logf("fault proxy: %s", st)
	t.Logf("soak figures: requests=%d faults_injected=%d failed_cleanly=%d versions_acked=%d verified=%d lost=%d",
		rep.Requests, st.Total(), rep.Failed, rep.VersionsAcked, rep.Verified, rep.Lost)
	if st.Total() < 20 || st.Faults["cut-body"] == 0 {
		t.Errorf("too few faults to prove anything: %s", st)
	}
	checkClean(t, e)
}

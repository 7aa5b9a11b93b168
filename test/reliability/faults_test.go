package reliability

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/load"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
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

// TestParquetThroughFaults is TestLoadThroughFaults with Parquet storage:
// pack runs every second (packing, merging, writing manifests, rewriting
// files for purges) while the proxy breaks S3 requests, and exports to a
// bucket through the same proxy; an export either finishes or fails with
// a clear refusal. After the faults stop and a restart, every
// acknowledged version reads back, check --deep is clean, and an export
// succeeds.
func TestParquetThroughFaults(t *testing.T) {
	d, long := soak(t, 5*time.Second)
	p := startProxied(t)
	bucket := p.srv.NewBucket(t, false)
	e := testenv.New(t, testenv.Options{Storage: p.storageTOML(t, bucket, "parquet/") +
		"\n[storage.parquet]\npack_interval = 1\nreader_grace = 0\n"})
	ts := tenants(e, 4)
	rate := 0.05
	if long {
		rate = 0.03
	}
	if err := p.proxy.SetRules(harsh(rate)...); err != nil {
		t.Fatal(err)
	}
	exportBucket := p.srv.NewBucket(t, false)
	stopExports := make(chan struct{})
	exportsDone := make(chan [2]int)
	go func() {
		// Exports beside the load, through the faults: each one either
		// succeeds or is refused with a message, never hangs.
		ok, refused := 0, 0
		for i := 0; ; i++ {
			select {
			case <-stopExports:
				exportsDone <- [2]int{ok, refused}
				return
			case <-time.After(700 * time.Millisecond):
			}
			out, errOut, code := e.TryCLI("export", "parquet", "--tenant", ts[i%len(ts)].ID, "--to", fmt.Sprintf("s3://%s/run/", exportBucket))
			switch {
			case code == 0 && strings.Count(out, "\n") == 1:
				ok++
			case code == 1 && strings.HasPrefix(errOut, "vcon-server: ") && out == "":
				if refused == 0 {
					t.Logf("an export refused under faults: %s", strings.TrimSpace(errOut))
				}
				refused++
			default:
				t.Errorf("export under faults: exit %d, out %q, err %q", code, out, errOut)
			}
		}
	}()
	rep := runLoad(t, load.Config{
		URL: e.BaseURL, CAPEM: certPEM(t, e), Tenants: ts, Workers: 8, Duration: d, MaxBody: 16 << 10, Faulty: true,
		BeforeVerify: func() string {
			close(stopExports)
			p.proxy.Clear()
			e.Restart()
			return e.BaseURL
		},
	})
	counts := <-exportsDone
	st := p.proxy.Stats()
	packRuns := strings.Count(e.Log.String(), "pack run files=")
	t.Logf("fault proxy: %s; pack runs %d; exports done %d, refused %d", st, packRuns, counts[0], counts[1])
	t.Logf("soak figures: requests=%d faults_injected=%d failed_cleanly=%d versions_acked=%d verified=%d lost=%d",
		rep.Requests, st.Total(), rep.Failed, rep.VersionsAcked, rep.Verified, rep.Lost)
	if packRuns < 2 || counts[0]+counts[1] == 0 {
		t.Errorf("the run proved little: %d pack runs, %d exports", packRuns, counts[0]+counts[1])
	}
	lines := checkClean(t, e)
	packed := 0
	for _, l := range lines {
		packed += l.Packed
	}
	if packed == 0 {
		t.Errorf("nothing was packed: %+v", lines)
	}
	e.Start()
	if out, errOut, code := e.TryCLI("export", "parquet", "--tenant", ts[0].ID, "--to", fmt.Sprintf("s3://%s/after/", exportBucket)); code != 0 {
		t.Fatalf("export after the faults: %d %s %s", code, out, errOut)
	}
}

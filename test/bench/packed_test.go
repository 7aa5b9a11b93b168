package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/s3sig"
	"github.com/vcon-server/vcon-server/seal"
	"github.com/vcon-server/vcon-server/test/kit/benchkit"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
	"github.com/vcon-server/vcon-server/test/kit/tlsproxy"
)

// parquetTOML turns Parquet storage on with pack runs only at start (and
// when a test calls one).
const parquetTOML = "\n[storage.parquet]\npack_interval = 86400\n"

// storeN stores n 4 KiB vCons from 16 clients and returns their uuids.
func storeN(t testing.TB, a *api, n int) []string {
	t.Helper()
	uuids := make([]string, n)
	for i := range uuids {
		uuids[i] = ids.NewRandom().String()
	}
	counted(t, 16, n, func(i int) error { return a.do("POST", "/vcons", benchkit.Vcon4K(uuids[i]), 201) })
	return uuids
}

var packRunLine = regexp.MustCompile(`pack run files=(\d+) versions=(\d+) failed=(\d+)`)

// lastPackRun is the last pack run line's versions and failed counts.
func lastPackRun(t testing.TB, log string) (versions, failed string) {
	t.Helper()
	m := packRunLine.FindAllStringSubmatch(log, -1)
	if len(m) == 0 {
		t.Fatalf("no pack run line in the log:\n%s", tail([]byte(log)))
	}
	return m[len(m)-1][2], m[len(m)-1][3]
}

// packedRows: at 1 client, the time the server adds to a packed read (its
// HTTPS GET minus a raw ranged GET of the same bytes of the pack file)
// against what it adds to a read of a version still an object (HTTPS GET
// minus a raw GET of the object), and that time itself beside what the
// do-nothing TLS proxy adds to the same GET: the medians of
// VCON_PERF_READS reads of each kind, taken in turns.
func packedRows(t *testing.T, tb *table) {
	ctx := context.Background()
	n, reads := 200, envInt(t, "VCON_PERF_READS", 1000)
	if smoke {
		n, reads = 20, 20
	}
	srv := startS3(t)
	bucket := srv.NewBucket(t, false)
	e := testenv.Prepare(t, testenv.Options{Listen: testenv.FreePort(t), Storage: srv.StorageTOML(t, bucket, "") + parquetTOML})
	tenant := e.Tenant("acme")
	a := newAPI(e, e.NewKey(tenant, "write", "read").Token)
	p := e.StartBinary()
	packed := storeN(t, a, n)
	p.Stop()
	// A start packs them (docs/parquet-storage.md: a pack run at start).
	runs := countLog(t, p.Log, "pack run files=")
	p = e.StartBinary()
	if v, f := lastPackRun(t, waitLog(t, p.Log, "pack run files=", runs+1, 5*time.Minute)); v != fmt.Sprint(n) || f != "0" {
		t.Fatalf("the pack run at start packed %s versions (failed %s), want %d", v, f, n)
	}
	// With profiles on, a start of its own, with nothing left to pack, so
	// that the pack run is not in the reads' profile.
	p = nextPhase(t, e, p, "packed-read")
	objects := storeN(t, a, n)

	cat, err := catalog.Open(ctx, e.Config.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	versions := func(uuids []string, want catalog.Location) []catalog.Version {
		var out []catalog.Version
		for _, u := range uuids {
			v, err := cat.Current(ctx, ids.MustParse(tenant), ids.MustParse(u))
			if err != nil || v.Location != want {
				t.Fatalf("%s: %s (%v), want %s", u, v.Location, err, want)
			}
			out = append(out, v)
		}
		return out
	}
	pv, ov := versions(packed, catalog.Packed), versions(objects, catalog.InS3)
	cat.Close()
	// The S3 rows PUT objects of this size as the floor of a store.
	if want := seal.SealedSize(4096); ov[0].SealedSize != want {
		t.Fatalf("a 4 KiB vCon is stored as %d sealed bytes, but the S3 rows PUT %d", ov[0].SealedSize, want)
	}

	raw := srv.Client(t)
	px := tlsproxy.Start(t, srv.Endpoint, srv.CAPEM)
	proxied := srv.ClientAt(t, px.URL, px.CAPEM)
	clientGet := func(c *s3sig.Client, key, rng string, want int64) time.Duration {
		s := time.Now()
		r, err := c.GetObject(ctx, bucket, key, s3sig.GetOptions{Range: rng})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if err != nil || got != want {
			t.Fatalf("GET %s %s: %d bytes (%v), want %d", key, rng, got, err, want)
		}
		return time.Since(s)
	}
	httpGet := func(u string) time.Duration {
		s := time.Now()
		if err := a.do("GET", "/vcons/"+u, nil, 200); err != nil {
			t.Fatal(err)
		}
		return time.Since(s)
	}
	var hp, ho, rp, ro, po []time.Duration
	for i := 0; i < reads+reads/10; i++ {
		j := i % n
		a, b := httpGet(packed[j]), httpGet(objects[j])
		c := clientGet(raw, pv[j].PackKey, s3sig.ByteRange(pv[j].PackOffset, pv[j].PackLength), pv[j].PackLength)
		key := archive.ObjectKey(catalog.InS3, ov[j].Tenant, ov[j].ID)
		d := clientGet(raw, key, "", ov[j].SealedSize)
		e := clientGet(proxied, key, "", ov[j].SealedSize)
		if i >= reads/10 { // the first tenth warms connections and caches
			hp, ho, rp, ro, po = append(hp, a), append(ho, b), append(rp, c), append(ro, d), append(po, e)
		}
	}
	p.Stop()
	mHP, mHO, mRP, mRO, mPO := median(hp), median(ho), median(rp), median(ro), median(po)
	addP, addO := mHP-mRP, mHO-mRO
	tb.add(row{
		figure:   "packed read, 1 client: time the server adds (vs what it adds to an object read)",
		server:   fmt.Sprintf("+%s (HTTPS %s − ranged GET %s)", micros(addP), micros(mHP), micros(mRP)),
		baseline: fmt.Sprintf("+%s (HTTPS %s − GET %s)", micros(addO), micros(mHO), micros(mRO)),
		ratio:    ratio(float64(addP), float64(addO)),
		goal:     "≤ 1.00×",
		met:      yes(addP <= addO),
	})
	tb.add(row{
		figure:   "read, 1 client: time the server adds (S3 object, median)",
		server:   micros(mHO),
		baseline: "GET " + micros(mRO),
		ratio:    "+" + micros(addO),
		goal:     "≤ +200 µs",
		met:      yes(addO <= 200*time.Microsecond),
	})
	// What a hop costs by itself: the same GET through the do-nothing TLS
	// proxy of the S3 rows, the least any server in between adds.
	tb.add(row{
		figure:   "read, 1 client: time a do-nothing TLS proxy adds to the same GET (median)",
		server:   "proxied GET " + micros(mPO),
		baseline: "GET " + micros(mRO),
		ratio:    "+" + micros(mPO-mRO),
	})
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// packRows: a pack run of VCON_PERF_PACK objects of 4 KiB into a Parquet
// file, whole (reads, the file's PUT, the commit, the deletes), against
// what it cannot do without: a GET of each object (16 at once) and one
// PUT of their bytes. The run is the in-process server's
// (Daemon.PackRun): a started binary packs only at start, after its look;
// its CPU profile is this process's, in which nothing else runs then.
func packRows(t *testing.T, tb *table) {
	ctx := context.Background()
	n := envInt(t, "VCON_PERF_PACK", 10000)
	srv := startS3(t)
	bucket := srv.NewBucket(t, false)
	e := testenv.New(t, testenv.Options{Storage: srv.StorageTOML(t, bucket, "") + parquetTOML})
	e.Daemon.PackRun(ctx) // the start's run had nothing to pack; this one neither
	a := newAPI(e, e.NewKey(e.Tenant("acme"), "write").Token)
	storeN(t, a, n)

	raw := srv.Client(t)
	var keys []string
	if err := raw.ListAll(ctx, bucket, "tenants/", func(o s3sig.Object) error {
		if strings.Contains(o.Key, "/objects/") {
			keys = append(keys, o.Key)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(keys) != n {
		t.Fatalf("%d objects in the bucket, want %d", len(keys), n)
	}
	start := time.Now()
	sizes := make([]int64, n)
	counted(t, 16, n, func(i int) error {
		r, err := raw.GetObject(ctx, bucket, keys[i], s3sig.GetOptions{})
		if err != nil {
			return err
		}
		defer r.Body.Close()
		sizes[i], err = io.Copy(io.Discard, r.Body)
		return err
	})
	var total int64
	for _, s := range sizes {
		total += s
	}
	file := strings.NewReader(strings.Repeat("x", int(total)))
	if _, err := raw.PutObject(ctx, bucket, "floor/pack", file, total, s3sig.PutOptions{IfNoneMatch: true}); err != nil {
		t.Fatal(err)
	}
	floor := time.Since(start)

	stop := profileHere(t, "pack-run")
	start = time.Now()
	e.Daemon.PackRun(ctx)
	run := time.Since(start)
	stop()
	if v, f := lastPackRun(t, e.Log.String()); v != fmt.Sprint(n) || f != "0" {
		t.Fatalf("the pack run packed %s versions (failed %s), want %d", v, f, n)
	}
	server, base := float64(n)/run.Seconds(), float64(n)/floor.Seconds()
	tb.add(row{
		figure:   fmt.Sprintf("pack run, %s versions (vs GET each + one PUT of their bytes)", thousands(n)),
		server:   fmt.Sprintf("%s (%.1f s)", perSec(server), run.Seconds()),
		baseline: fmt.Sprintf("%s (%.1f s)", perSec(base), floor.Seconds()),
		ratio:    ratio(server, base),
		goal:     "versions/s before and after (DeleteObjects)",
	})
}

// profileHere writes this process's CPU profile to <dir>/<name>.pprof
// until the returned function is called, when profiles are on.
func profileHere(t testing.TB, name string) func() {
	dir := testenv.CPUProfileDir()
	if dir == "" {
		return func() {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, name+".pprof"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

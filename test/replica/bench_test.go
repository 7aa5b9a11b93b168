package replica

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/seal"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
	"github.com/vcon-server/vcon-server/vcon"
)

// TestReplicaBench is the replica's benchmark (issue 14), run by `make
// replica-bench` and never by `make test`: it skips unless
// VCON_REPLICA_BENCH=1. On the real binary, with the vCons in the data
// directory and the replica in a directory of its own:
//
//   - ingest by 8 clients with the replica off, max_lag = 1 and max_lag = 0,
//     in turns in one run, as stores per second and their ratio to the
//     replica off; with the bytes and the objects (PUTs, the head's
//     rewrites included) uploaded to the replica per stored version
//     (vcon_replica_uploaded_bytes_total and _objects_total over the
//     stores);
//   - at VCON_REPLICA_BENCH_VERSIONS versions (100,000 by default; the
//     catalog seeded directly, as test/scale does): the first generation,
//     the latency of a 0d DELETE (its rollover included) with and without
//     the replica, and the time of `restore`.
//
// VCON_REPLICA_BENCH_SECONDS is each ingest turn's length (10 by default),
// VCON_REPLICA_BENCH_PROFILE a file for a CPU profile of an in-process
// server under the same load with max_lag = 0.
func TestReplicaBench(t *testing.T) {
	if os.Getenv("VCON_REPLICA_BENCH") != "1" {
		t.Skip("the replica benchmark runs with VCON_REPLICA_BENCH=1 (make replica-bench)")
	}
	secs := envInt(t, "VCON_REPLICA_BENCH_SECONDS", 10)
	size := envInt(t, "VCON_REPLICA_BENCH_VERSIONS", 100_000)
	var out strings.Builder
	fmt.Fprintf(&out, "replica benchmark: %s, %d CPUs, %s\n", runtime.Version(), runtime.NumCPU(), time.Now().UTC().Format(time.RFC3339))
	benchIngest(t, &out, time.Duration(secs)*time.Second)
	benchPurgeAndRestore(t, &out, size)
	if path := os.Getenv("VCON_REPLICA_BENCH_PROFILE"); path != "" {
		benchProfile(t, path, time.Duration(secs)*time.Second)
		fmt.Fprintf(&out, "CPU profile of an in-process server, max_lag = 0, 8 clients: %s\n", path)
	}
	t.Log("\n" + out.String())
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// ingestCase is one configuration of the ingest benchmark.
type ingestCase struct {
	name   string
	lag    int // -1: no replica
	stores int
	took   time.Duration
	bytes  float64
	puts   float64
	lat    []time.Duration
}

func benchIngest(t *testing.T, out *strings.Builder, d time.Duration) {
	cases := []*ingestCase{{name: "replica off", lag: -1}, {name: "max_lag = 1", lag: 1}, {name: "max_lag = 0", lag: 0}}
	// Two turns of each, interleaved, so that a slow moment of a shared
	// host falls on every configuration alike.
	for range 2 {
		for _, c := range cases {
			ingestTurn(t, c, d)
		}
	}
	off := float64(cases[0].stores) / cases[0].took.Seconds()
	fmt.Fprintf(out, "\ningest, 8 clients, vCons of about 1 KiB, data-directory storage, replica in a directory, 2 turns of %s each:\n", d)
	fmt.Fprintf(out, "  %-12s %10s %8s %10s %10s %14s %14s\n", "", "stores/s", "ratio", "p50", "p99", "replica B/ver", "replica PUT/ver")
	for _, c := range cases {
		rate := float64(c.stores) / c.took.Seconds()
		slices.Sort(c.lat)
		per, puts := "-", "-"
		if c.lag >= 0 {
			per = fmt.Sprintf("%.0f", c.bytes/float64(c.stores))
			puts = fmt.Sprintf("%.3f", c.puts/float64(c.stores))
		}
		fmt.Fprintf(out, "  %-12s %10.0f %8.2f %10s %10s %14s %14s\n", c.name, rate, rate/off,
			c.lat[len(c.lat)/2].Round(10*time.Microsecond), c.lat[len(c.lat)*99/100].Round(10*time.Microsecond), per, puts)
	}
}

func ingestTurn(t *testing.T, c *ingestCase, d time.Duration) {
	opts := testenv.Options{Listen: testenv.FreePort(t), MinFree: "1MiB"}
	if c.lag >= 0 {
		opts.Storage = replicaTOML(t.TempDir(), c.lag)
	}
	e := testenv.Prepare(t, opts)
	k := e.NewKey(e.Tenant("bench"), "write")
	ops := e.OperatorKey()
	p := e.StartBinary()
	defer p.Stop()
	storeFor(t, e, k.Token, time.Second) // warm up: the first generation, connections
	before, beforePuts := uploaded(t, e, ops.Token, c.lag)
	n, took, lat := storeFor(t, e, k.Token, d)
	after, afterPuts := uploaded(t, e, ops.Token, c.lag)
	c.stores += n
	c.took += took
	c.bytes += after - before
	c.puts += afterPuts - beforePuts
	c.lat = append(c.lat, lat...)
}

// uploaded reads vcon_replica_uploaded_bytes_total and _objects_total
// once the replica has caught up and the metrics have been copied (once a
// second).
func uploaded(t *testing.T, e *testenv.Env, token string, lag int) (bytes, puts float64) {
	if lag < 0 {
		return 0, 0
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		time.Sleep(1200 * time.Millisecond)
		m := string(e.Do("GET", "/metrics", token, nil).Body)
		if strings.Contains(m, "\nvcon_replica_lag_seconds 0\n") || time.Now().After(deadline) {
			return metricValue(m, "vcon_replica_uploaded_bytes_total"), metricValue(m, "vcon_replica_uploaded_objects_total")
		}
	}
}

func metricValue(text, name string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v
		}
	}
	return 0
}

// storeFor stores vCons of about 1 KiB from 8 clients for d and returns
// how many were acknowledged, the time taken and each one's latency.
func storeFor(t *testing.T, e *testenv.Env, token string, d time.Duration) (int, time.Duration, []time.Duration) {
	var mu sync.Mutex
	var lat []time.Duration
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := e.HTTPClient()
			var mine []time.Duration
			for time.Now().Before(end) {
				u := ids.NewRandom().String()
				body := apitest.NewVcon(u, "bench "+strings.Repeat("x", 800), "+15555550100")
				t0 := time.Now()
				status, _, err := do(context.Background(), client, "POST", e.BaseURL+"/vcons", token, body)
				if err != nil || status != 201 {
					failed.Add(1)
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	took := time.Since(start)
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d stores failed", n)
	}
	return len(lat), took, lat
}

// benchPurgeAndRestore seeds n versions, times 0d DELETEs without and with
// the replica, and a restore.
func benchPurgeAndRestore(t *testing.T, out *strings.Builder, n int) {
	e := testenv.Prepare(t, testenv.Options{Listen: testenv.FreePort(t), Retention: "0d", MinFree: "1MiB"})
	tenant := e.Tenant("bench")
	k := e.NewKey(tenant, "write", "read", "delete")
	tid, err := ids.Parse(tenant)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	uuids := seed(t, e, tid, n)
	fmt.Fprintf(out, "\nat %d versions (seeded in %s):\n", n, time.Since(start).Round(time.Second))

	const deletes = 20
	p := e.StartBinary()
	off := deleteSome(t, e, k.Token, uuids[:deletes/2])
	p.Stop()

	target := t.TempDir()
	e.WriteConfig(replicaTOML(target, 1))
	log := readServeLog(t, e)
	start = time.Now()
	p = e.StartBinary()
	gen := waitServeLog(t, e, log, "replica: generation written", 10*time.Minute)
	fmt.Fprintf(out, "  first generation: %s after the start began, %s\n", time.Since(start).Round(100*time.Millisecond), field(gen, "bytes"))
	log = readServeLog(t, e)
	on := deleteSome(t, e, k.Token, uuids[deletes/2:deletes])
	var rollovers []string
	for _, l := range strings.Split(readServeLog(t, e)[len(log):], "\n") {
		if strings.Contains(l, "replica: generation written") {
			rollovers = append(rollovers, field(l, "bytes"))
		}
	}
	p.Stop()
	fmt.Fprintf(out, "  0d DELETE, one at a time, %d each: replica off %s; replica on (max_lag = 1) %s\n", deletes/2, latencies(off), latencies(on))
	fmt.Fprintf(out, "  bytes written by each DELETE's rollover: %s\n", strings.Join(rollovers, " "))

	for _, f := range []string{"catalog.db", "catalog.db-wal", "catalog.db-shm"} {
		if err := os.Remove(filepath.Join(e.Config.DataDir, f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(testenv.Binary(t), "restore", "--config", e.ConfigPath)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start = time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("restore: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	took := time.Since(start)
	fmt.Fprintf(out, "  restore (the binary, wall clock): %s; %s", took.Round(10*time.Millisecond), stdout.String())
	p = e.StartBinary()
	if r := e.Do("GET", "/vcons/"+uuids[deletes].String(), k.Token, nil); r.Status != 200 {
		t.Fatalf("a kept vCon reads %d after the restore", r.Status)
	}
	if r := e.Do("GET", "/vcons/"+uuids[deletes-1].String(), k.Token, nil); r.Status != 404 {
		t.Fatalf("a purged vCon reads %d after the restore", r.Status)
	}
	p.Stop()
}

func deleteSome(t *testing.T, e *testenv.Env, token string, uuids []ids.ID) []time.Duration {
	var lat []time.Duration
	for _, u := range uuids {
		t0 := time.Now()
		r := e.Do("DELETE", "/vcons/"+u.String(), token, nil)
		if r.Status != 204 {
			t.Fatalf("DELETE: %d %s", r.Status, r.Body)
		}
		lat = append(lat, time.Since(t0))
	}
	return lat
}

func latencies(l []time.Duration) string {
	s := slices.Clone(l)
	slices.Sort(s)
	return fmt.Sprintf("min %s, median %s, max %s", s[0].Round(time.Millisecond), s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}

func readServeLog(t *testing.T, e *testenv.Env) string {
	b, err := os.ReadFile(filepath.Join(e.Dir, "serve.log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// waitServeLog waits for a line holding s after the first len(before)
// bytes of the log and returns it.
func waitServeLog(t *testing.T, e *testenv.Env, before, s string, limit time.Duration) string {
	deadline := time.Now().Add(limit)
	for {
		for _, l := range strings.Split(readServeLog(t, e)[len(before):], "\n") {
			if strings.Contains(l, s) {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log in %s", s, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// field returns key=value from a log line.
func field(line, key string) string {
	for _, f := range strings.Fields(line) {
		if strings.HasPrefix(f, key+"=") {
			return f
		}
	}
	return key + "=?"
}

// seed writes n versions of n vCons straight into the data directory and
// the catalog, as test/scale's direct build does: sealed objects, rows in
// transactions of 2,000. It returns the uuids.
func seed(t *testing.T, e *testenv.Env, tenant ids.ID, n int) []ids.ID {
	ctx := context.Background()
	dataDir := e.Config.DataDir
	unlock, err := catalog.Lock(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	mk, err := seal.LoadMasterKey(e.Config.MasterKey)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Open(ctx, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	folder := filepath.Dir(filepath.Join(dataDir, filepath.FromSlash(archive.ObjectKey(catalog.InDir, tenant, tenant))))
	if err := os.MkdirAll(folder, 0o700); err != nil {
		t.Fatal(err)
	}
	uuids := make([]ids.ID, n)
	for i := range uuids {
		uuids[i] = ids.NewRandom()
	}
	rows := make(chan catalog.Version, 4096)
	committed := make(chan error, 1)
	go func() {
		var err error
		batch := make([]catalog.Version, 0, 2000)
		flush := func() {
			if len(batch) == 0 || err != nil {
				return
			}
			err = cat.Update(ctx, func(tx *catalog.Tx) error {
				for _, v := range batch {
					if _, err := tx.InsertVersion(v, catalog.CreateOnly); err != nil {
						return err
					}
				}
				return nil
			})
			batch = batch[:0]
		}
		for v := range rows {
			if batch = append(batch, v); len(batch) == cap(batch) {
				flush()
			}
		}
		flush()
		committed <- err
	}()
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	for range max(2, runtime.NumCPU()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n && firstErr.Load() == nil; i = int(next.Add(1)) - 1 {
				v, err := sealOne(dataDir, mk, tenant, uuids[i], i)
				if err != nil {
					firstErr.Store(&err)
					return
				}
				rows <- v
			}
		}()
	}
	wg.Wait()
	close(rows)
	if p := firstErr.Load(); p != nil {
		t.Fatal(*p)
	}
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	return uuids
}

// sealOne does what a store does before its commit: inspect, seal under a
// new data key, write the object, wrap the key.
func sealOne(dataDir string, mk *seal.MasterKey, tenant, uuid ids.ID, i int) (catalog.Version, error) {
	b := apitest.NewVcon(uuid.String(), fmt.Sprintf("seeded %d %s", i, strings.Repeat("x", 800)), "+15555550100")
	meta, err := vcon.Inspect(bytes.NewReader(b), false, 64<<20)
	if err != nil {
		return catalog.Version{}, err
	}
	now := time.Now()
	vid := ids.NewV7(now)
	dk, err := seal.NewDataKey()
	if err != nil {
		return catalog.Version{}, err
	}
	var sealed bytes.Buffer
	sw, err := seal.NewWriter(&sealed, dk, tenant, vid)
	if err != nil {
		return catalog.Version{}, err
	}
	if _, err := sw.Write(b); err != nil {
		return catalog.Version{}, err
	}
	if err := sw.Close(); err != nil {
		return catalog.Version{}, err
	}
	path := filepath.Join(dataDir, filepath.FromSlash(archive.ObjectKey(catalog.InDir, tenant, vid)))
	if err := os.WriteFile(path, sealed.Bytes(), 0o600); err != nil {
		return catalog.Version{}, err
	}
	wrapped, err := mk.Wrap(dk, tenant, vid)
	if err != nil {
		return catalog.Version{}, err
	}
	return catalog.Version{
		ID: vid, Tenant: tenant, UUID: uuid, StoredAt: now, ContentType: "application/vcon",
		Form: meta.Form, Size: meta.Size, SealedSize: seal.SealedSize(meta.Size),
		WrappedKey: wrapped, Location: catalog.InDir,
	}, nil
}

// benchProfile profiles an in-process server under the ingest load with
// max_lag = 0.
func benchProfile(t *testing.T, path string, d time.Duration) {
	e := testenv.New(t, testenv.Options{Storage: replicaTOML(t.TempDir(), 0), MinFree: "1MiB"})
	k := e.NewKey(e.Tenant("bench"), "write")
	storeFor(t, e, k.Token, time.Second)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	storeFor(t, e, k.Token, d)
	pprof.StopCPUProfile()
}

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
	"github.com/vcon-server/vcon-server/test/kit/replicabench"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
	"github.com/vcon-server/vcon-server/vcon"
)

// TestReplicaBench is the replica's benchmark (issues 14 and 31), run by
// `make replica-bench` and never by `make test`: it skips unless
// VCON_REPLICA_BENCH=1. On the real binary:
//
//   - ingest by 8 clients of 4 KiB vCons with the replica off, max_lag = 1
//     and max_lag = 0, with the vCons in the data directory and the
//     replica in a directory, and with the vCons in a bucket of versitygw
//     on loopback and the replica in the bucket: interleaved rounds, the
//     median of each configuration's rounds, its ratio to the replica off
//     on the same storage, its p50 and p99 (the goal: p99 at most
//     3× p50), and the bytes and objects uploaded to the replica per
//     stored version (test/kit/replicabench says how);
//   - at VCON_REPLICA_BENCH_VERSIONS versions (100,000 by default; the
//     catalog seeded directly, as test/scale does): the first generation,
//     the latency of a 0d DELETE (its rollover included) with and without
//     the replica, and the time of `restore`.
//
// The knobs: VCON_REPLICA_BENCH_SECONDS is each ingest turn's length (5
// by default), VCON_REPLICA_BENCH_ROUNDS the rounds (5),
// VCON_REPLICA_BENCH_STORAGE=dir or s3 only that storage's rows, for a
// quick look; VCON_REPLICA_BENCH_PROFILE a file for a CPU profile of an
// in-process server under the same load with the replica in a directory,
// at VCON_REPLICA_BENCH_PROFILE_LAG's max_lag (0 when unset);
// VCON_REPLICA_BENCH_OTHER the path of another build of vcon-server (go
// build it from another checkout), whose max_lag = 0 row is measured in
// the same rounds, to compare two builds; VCON_REPLICA_BENCH_TARGETS a
// directory on another disk for the directory replicas (the test's
// temporary directory by default, on the data directories' disk).
func TestReplicaBench(t *testing.T) {
	if os.Getenv("VCON_REPLICA_BENCH") != "1" {
		t.Skip("the replica benchmark runs with VCON_REPLICA_BENCH=1 (make replica-bench)")
	}
	secs := envInt(t, "VCON_REPLICA_BENCH_SECONDS", 5)
	size := envInt(t, "VCON_REPLICA_BENCH_VERSIONS", 100_000)
	o := replicabench.Options{Turn: time.Duration(secs) * time.Second, Rounds: envInt(t, "VCON_REPLICA_BENCH_ROUNDS", 5), Other: os.Getenv("VCON_REPLICA_BENCH_OTHER"), Targets: os.Getenv("VCON_REPLICA_BENCH_TARGETS")}
	switch storage := os.Getenv("VCON_REPLICA_BENCH_STORAGE"); storage {
	case "", "dir", "s3":
		o.Dir = storage != "s3"
		if storage != "dir" {
			o.S3 = s3test.Start(t, "versitygw")
		}
	default:
		t.Fatalf("VCON_REPLICA_BENCH_STORAGE=%q: want dir, s3 or nothing (both)", storage)
	}
	testenv.Binary(t) // built before any clock starts
	var out strings.Builder
	fmt.Fprintf(&out, "replica benchmark: %s, %d CPUs, %s\n\n", runtime.Version(), runtime.NumCPU(), time.Now().UTC().Format(time.RFC3339))
	out.WriteString(replicabench.Table(replicabench.Run(t, o), o))
	benchPurgeAndRestore(t, &out, size)
	if path := os.Getenv("VCON_REPLICA_BENCH_PROFILE"); path != "" {
		lag := 0
		if os.Getenv("VCON_REPLICA_BENCH_PROFILE_LAG") != "" {
			lag = envInt(t, "VCON_REPLICA_BENCH_PROFILE_LAG", 0)
		}
		benchProfile(t, path, lag, o.Turn)
		fmt.Fprintf(&out, "CPU profile of an in-process server, max_lag = %d, 8 clients: %s\n", lag, path)
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
func benchProfile(t *testing.T, path string, lag int, d time.Duration) {
	e := testenv.New(t, testenv.Options{Storage: replicaTOML(t.TempDir(), lag), MinFree: "1MiB"})
	k := e.NewKey(e.Tenant("bench"), "write")
	client := e.HTTPClient()
	replicabench.Store(t, e, client, k.Token, time.Second)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	replicabench.Store(t, e, client, k.Token, d)
	pprof.StopCPUProfile()
}

package replica

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// loadFor is how long the store load runs before the kill.
const loadFor = 2 * time.Second

// TestLoseTheHost is issue 14's first promise, on each S3 server, with
// Parquet storage off and on, with max_lag 0 and 1: 8 clients store,
// replace and delete vCons on the real binary, which is killed with
// SIGKILL while they do; the whole data directory is deleted (the objects are in the
// bucket, the replica under replica/ beside them); restore rebuilds the
// catalog from the replica and serve starts on it. With max_lag 0 every
// acknowledged version reads back; with max_lag 1 every version
// acknowledged more than a second before the kill; and check --deep,
// with the server stopped, is clean. With max_lag 0 the host is lost a
// second time, under a second load, and restored from the generations the
// restored server wrote: both loads' versions read back.
func TestLoseTheHost(t *testing.T) {
	for _, kind := range s3test.Kinds {
		t.Run(kind, func(t *testing.T) {
			srv := s3test.Start(t, kind)
			for _, parquet := range []bool{false, true} {
				for _, lag := range []int{0, 1} {
					name := "objects"
					if parquet {
						name = "parquet"
					}
					t.Run(name+"/max_lag="+itoa(lag), func(t *testing.T) {
						loseTheHost(t, host{toml: bucketTOML(t, srv, parquet, lag), lag: lag, wipe: wipeDataDir, losses: 2 - lag})
					})
				}
			}
			// The replica in a directory on another disk (here, beside
			// the data directory), which the loss spares.
			t.Run("objects/to=dir/max_lag=0", func(t *testing.T) {
				toml := srv.StorageTOML(t, srv.NewBucket(t, false), "vcon/") + replicaTOML(t.TempDir(), 0)
				loseTheHost(t, host{toml: toml, lag: 0, wipe: wipeDataDir})
			})
			// Killed right after a pack file's PUT, and right after its
			// commit: the replica may not hold the commit, and the bucket
			// holds the file. The restored catalog must name it all the
			// same (pending, for recovery to delete, or live), or check
			// reports it named by no row.
			for _, at := range []string{crashpoint.PackAfterPut, crashpoint.PackAfterCommit} {
				t.Run("parquet/max_lag=1/"+at, func(t *testing.T) {
					// Packed every 2 s, so that the first file is made
					// after a second of acknowledged stores at least.
					toml := strings.Replace(bucketTOML(t, srv, true, 1), parquetTOML, "\n[storage.parquet]\npack_interval = 2\n", 1)
					loseTheHost(t, host{toml: toml, lag: 1, crashAt: at, wipe: wipeDataDir})
				})
			}
		})
	}
}

// TestLoseTheCatalogDirStorage: with data-directory storage and the
// replica in the bucket of a [replica.s3] table, on each S3 server, the
// load is killed, the catalog's files alone are deleted (the objects are
// in the data directory), and restore and serve find every version as
// max_lag promises.
func TestLoseTheCatalogDirStorage(t *testing.T) {
	for _, kind := range s3test.Kinds {
		t.Run(kind, func(t *testing.T) {
			srv := s3test.Start(t, kind)
			for _, lag := range []int{0, 1} {
				t.Run("max_lag="+itoa(lag), func(t *testing.T) {
					toml := replicaTOML("s3", lag) + replicaS3TOML(t, srv, srv.NewBucket(t, false), "replica-of-host-1/", "")
					loseTheHost(t, host{toml: toml, lag: lag, wipe: wipeCatalog})
				})
			}
		})
	}
}

// bucketTOML keeps the objects in a new bucket on srv, Parquet storage on
// when asked, and the replica under replica/ in the same bucket.
func bucketTOML(t *testing.T, srv *s3test.Server, parquet bool, lag int) string {
	storage := srv.StorageTOML(t, srv.NewBucket(t, false), "vcon/")
	if parquet {
		storage += parquetTOML
	}
	return storage + replicaTOML("s3", lag)
}

// wipeDataDir is the loss of the host's disk: the whole data directory.
func wipeDataDir(t *testing.T, e *testenv.Env) {
	if err := os.RemoveAll(e.Config.DataDir); err != nil {
		t.Fatal(err)
	}
}

// wipeCatalog is the loss of the catalog's files alone.
func wipeCatalog(t *testing.T, e *testenv.Env) {
	for _, f := range []string{"catalog.db", "catalog.db-wal", "catalog.db-shm"} {
		if err := os.Remove(filepath.Join(e.Config.DataDir, f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

// host is one server to lose: its [storage] and [replica] tables, its
// max_lag, the crash point to die at ("": a SIGKILL after loadFor), what
// the loss takes, and how many times it is lost (1 when 0): each loss
// after the first restores from the generations the restored server wrote.
type host struct {
	toml    string
	lag     int
	crashAt string
	wipe    func(*testing.T, *testenv.Env)
	losses  int
}

// loseTheHost runs the load, kills the server, wipes what the host loses,
// restores, serves and verifies, as many times as h.losses says; each
// restore verifies what every earlier load left too.
func loseTheHost(t *testing.T, h host) {
	e := testenv.Prepare(t, testenv.Options{Listen: testenv.FreePort(t), Storage: h.toml})
	token := e.NewKey(e.Tenant("acme"), "write", "read", "delete").Token
	var env []string
	if h.crashAt != "" {
		env = append(env, crashpoint.EnvVar+"="+h.crashAt)
	}
	p := e.StartBinary(env...)
	type loss struct {
		run    *loadRun
		before time.Time // versions acknowledged before it must be found
	}
	var losses []loss
	for n := range max(h.losses, 1) {
		run, killed := loadAndKill(t, e, p, token, h.crashAt)
		h.crashAt = "" // the servers started after a restore run to the end
		h.wipe(t, e)
		began := time.Now()
		t.Logf("restore: %s", e.CLI("restore"))
		restoreTook := time.Since(began)
		if n == 0 {
			out, errOut, code := e.TryCLI("restore")
			if code == 0 || !strings.Contains(errOut, filepath.Join(e.Config.DataDir, "catalog.db")) {
				t.Errorf("a second restore over the restored catalog: exit %d, want a refusal naming the catalog\n%s\n%s", code, out, errOut)
			}
		}
		p = e.StartBinary()
		before := killed
		if h.lag > 0 {
			before = killed.Add(-time.Duration(h.lag) * time.Second)
		}
		losses = append(losses, loss{run, before})
		for i, l := range losses {
			required := l.run.verify(t, e, token, l.before)
			if i == n {
				t.Logf("loss %d: %d uuids, %d versions and %d DELETEs acknowledged, %d versions acknowledged before %s and found; restore took %s",
					n+1, len(run.byUUID), run.acked, run.deleted, required, before.Format("15:04:05.000"), restoreTook.Round(time.Millisecond))
				if h.lag > 0 && required == 0 {
					t.Errorf("no version was acknowledged more than max_lag before the kill: the run proved little")
				}
			}
		}
		if t.Failed() {
			break
		}
	}
	p.Stop()
	checkDeep(t, e)
	if t.Failed() {
		serveLog(t, e)
	}
}

// loadAndKill runs the store load against the server p until it dies at
// crashAt, or for loadFor and then a SIGKILL; it returns what the load
// sent and when the server died.
func loadAndKill(t *testing.T, e *testenv.Env, p *testenv.Proc, token, crashAt string) (*loadRun, time.Time) {
	ended := make(chan time.Time, 1)
	go func() { p.Wait(); ended <- time.Now() }()
	stop := make(chan struct{})
	done := make(chan *loadRun)
	go func() { done <- storeLoad(t, e, 8, stop, token) }()
	var killed time.Time
	if crashAt == "" {
		time.Sleep(loadFor)
		killed = time.Now()
		p.Kill()
	} else {
		select {
		case killed = <-ended:
		case <-time.After(20 * time.Second):
			p.Kill()
			close(stop)
			<-done
			t.Fatalf("the server never reached %s", crashAt)
		}
	}
	close(stop)
	run := <-done
	for _, u := range run.unexpected {
		t.Errorf("under load: %s", u)
	}
	if run.acked < 20 {
		serveLog(t, e)
		t.Fatalf("%d versions acknowledged in %s: the load proved little", run.acked, loadFor)
	}
	return run, killed
}

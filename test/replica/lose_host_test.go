package replica

import (
	"os"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// loadFor is how long the store load runs before the kill.
const loadFor = 2 * time.Second

// TestLoseTheHost is issue 14's first promise, on each S3 server, with
// Parquet storage off and on, with max_lag 0 and 1: 8 clients store and
// replace vCons on the real binary, which is killed with SIGKILL while
// they do; the whole data directory is deleted (the objects are in the
// bucket, the replica under replica/ beside them); restore rebuilds the
// catalog from the replica and serve starts on it. With max_lag 0 every
// acknowledged version reads back; with max_lag 1 every version
// acknowledged more than a second before the kill; and check --deep,
// with the server stopped, is clean.
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
						loseTheHost(t, srv, parquet, lag, "")
					})
				}
			}
			// Killed right after a pack file's PUT, and right after its
			// commit: the replica may not hold the commit, and the bucket
			// holds the file. The restored catalog must name it all the
			// same (pending, for recovery to delete, or live), or check
			// reports it named by no row.
			for _, at := range []string{crashpoint.PackAfterPut, crashpoint.PackAfterCommit} {
				t.Run("parquet/max_lag=1/"+at, func(t *testing.T) {
					loseTheHost(t, srv, true, 1, at)
				})
			}
		})
	}
}

// loseTheHost runs the load, kills the server (at the crash point crashAt
// when given, else after loadFor), deletes the data directory, restores
// and verifies.
func loseTheHost(t *testing.T, srv *s3test.Server, parquet bool, lag int, crashAt string) {
	storage := srv.StorageTOML(t, srv.NewBucket(t, false), "vcon/")
	if parquet {
		storage += parquetTOML
	}
	e := testenv.Prepare(t, testenv.Options{Listen: testenv.FreePort(t), Storage: storage + replicaTOML("s3", lag)})
	token := e.NewKey(e.Tenant("acme"), "write", "read", "delete").Token
	var env []string
	if crashAt != "" {
		env = append(env, crashpoint.EnvVar+"="+crashAt)
	}
	p := e.StartBinary(env...)
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

	if err := os.RemoveAll(e.Config.DataDir); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	t.Logf("restore: %s", e.CLI("restore"))
	restoreTook := time.Since(began)
	p = e.StartBinary()
	before := killed
	if lag > 0 {
		before = killed.Add(-time.Duration(lag) * time.Second)
	}
	required := run.verify(t, e, token, before)
	t.Logf("%d uuids, %d versions acknowledged, %d acknowledged before %s and found; restore took %s",
		len(run.byUUID), run.acked, required, before.Format("15:04:05.000"), restoreTook.Round(time.Millisecond))
	if lag > 0 && required == 0 {
		t.Errorf("no version was acknowledged more than max_lag before the kill: the run proved little")
	}
	p.Stop()
	checkDeep(t, e)
	if t.Failed() {
		serveLog(t, e)
	}
}

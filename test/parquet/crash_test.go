package parquet

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// crashEnv is a server on versitygw with Parquet storage whose pack runs
// come only at start (pack_interval is an hour), so that each start of the
// real binary is one pack run.
type crashEnv struct {
	*testenv.Env
	s      objstore.Store
	key    testenv.Key
	bodies map[string][]byte
}

func newCrashEnv(t *testing.T, srv *s3test.Server, retention string) *crashEnv {
	e := testenv.Prepare(t, testenv.Options{
		Listen:    testenv.FreePort(t),
		Retention: retention,
		Storage:   srv.StorageTOML(t, srv.NewBucket(t, false), "vcon/") + parquetTable(3600),
	})
	c := &crashEnv{Env: e, s: e.Store(), bodies: map[string][]byte{}}
	c.key = e.NewKey(e.Tenant("acme"), "write", "read", "delete")
	return c
}

// post stores a new vCon through the running binary.
func (c *crashEnv) post(t *testing.T) string {
	t.Helper()
	u := ids.NewRandom().String()
	body := apitest.NewVcon(u, "crash "+u, "+15555550100")
	if r := c.Do("POST", "/vcons", c.key.Token, body, "Content-Type", "application/vcon"); r.Status != 201 {
		t.Fatalf("POST: %d %s", r.Status, r.Body)
	}
	c.bodies[u] = body
	return u
}

// packedRun starts the binary, waits for its start-up pack run to end and
// stops it.
func (c *crashEnv) packedRun(t *testing.T) {
	t.Helper()
	c.startAndRun(t).Stop()
}

// startAndRun starts the binary and waits for its start-up pack run.
func (c *crashEnv) startAndRun(t *testing.T) *testenv.Proc {
	t.Helper()
	b, _ := os.ReadFile(c.Dir + "/serve.log")
	from := len(b)
	p := c.StartBinary()
	waitFor(t, 60*time.Second, "the start-up pack run", func() bool {
		return countPackRuns(serveLog(t, p)[from:]) >= 1
	})
	return p
}

// countPackRuns counts the pack run lines in a serve log.
func countPackRuns(log string) int {
	return strings.Count(log, "vcon_server::serve: pack run files=")
}

func serveLog(t testing.TB, p *testenv.Proc) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dieAtStart runs the binary with the crash point set, expecting it to
// kill itself during its start-up pack run; it waits for that.
func (c *crashEnv) dieAtStart(t *testing.T, point string) {
	t.Helper()
	logf, err := os.OpenFile(c.Dir+"/serve.log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(testenv.Binary(t), "serve", "--config", c.ConfigPath)
	cmd.Env = append(os.Environ(), crashpoint.EnvVar+"="+point)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			b, _ := os.ReadFile(c.Dir + "/serve.log")
			t.Fatalf("the server ended (%v) without dying at %s:\n%s", err, point, b)
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the server did not reach %s in 60 s", point)
	}
}

// dieOnDelete starts the binary with the crash point set and sends a
// DELETE that must kill it.
func (c *crashEnv) dieOnDelete(t *testing.T, point, uuid string) {
	t.Helper()
	p := c.StartBinary(crashpoint.EnvVar + "=" + point)
	req, _ := http.NewRequest("DELETE", c.BaseURL+"/vcons/"+uuid, nil)
	req.Header.Set("Authorization", "Bearer "+c.key.Token)
	if resp, err := c.Client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the server answered %d instead of dying at %s", resp.StatusCode, point)
	}
	p.Wait()
}

// readAll checks, through a running binary, that every acknowledged vCon
// reads back byte for byte and the purged ones not at all.
func (c *crashEnv) readAll(t *testing.T, purged ...string) {
	t.Helper()
	gone := map[string]bool{}
	for _, u := range purged {
		gone[u] = true
	}
	for u, body := range c.bodies {
		r := c.Do("GET", "/vcons/"+u, c.key.Token, nil)
		if gone[u] {
			if r.Status != 404 {
				t.Fatalf("a purged vCon reads %d after the restart", r.Status)
			}
			if r := c.Do("GET", "/vcons/"+u+"/versions", c.key.Token, nil); r.Status != 404 {
				t.Fatalf("a purged vCon's versions answer %d", r.Status)
			}
			continue
		}
		if r.Status != 200 || !bytes.Equal(r.Body, body) {
			t.Fatalf("an acknowledged vCon reads %d, %d bytes", r.Status, len(r.Body))
		}
	}
}

// TestKillPackRun kills the real binary at each step of a pack run and
// restarts it: every acknowledged vCon reads back byte for byte, the
// restart repairs the catalog and the bucket, and no orphan file remains.
func TestKillPackRun(t *testing.T) {
	srv := s3test.Start(t, "versitygw")
	for _, point := range []string{crashpoint.PackAfterPut, crashpoint.PackAfterCommit, crashpoint.ManifestAfterPut, crashpoint.PackAfterDeletes} {
		t.Run(point, func(t *testing.T) {
			c := newCrashEnv(t, srv, "")
			p := c.StartBinary()
			c.post(t)
			c.post(t)
			p.Stop()
			c.dieAtStart(t, point)
			p = c.startAndRun(t)
			c.readAll(t)
			log := serveLog(t, p)
			if point == crashpoint.PackAfterPut && !strings.Contains(log, "INFO vcon_server::serve: start-up recovery removed pack files that no catalog row names removed=1\n") {
				t.Fatalf("no recovery line in the log:\n%s", log)
			}
			if n := countObjects(t, c.s); n != 0 {
				t.Fatalf("%d objects after the restart's pack run", n)
			}
			if m := keys(t, c.s, "tenants/"); !containsPart(m, "/manifest/") {
				t.Fatalf("no manifest after the restart: %v", m)
			}
			p.Stop()
			checkBucket(t, c.Env, c.s)
		})
	}
}

func containsPart(keys []string, part string) bool {
	for _, k := range keys {
		if strings.Contains(k, part) {
			return true
		}
	}
	return false
}

// TestKillMerge kills the real binary at each step of a merge: the first
// start packs one vCon into a file, the second packs another into a second
// file and merges the two, and dies there.
func TestKillMerge(t *testing.T) {
	srv := s3test.Start(t, "versitygw")
	for _, point := range []string{crashpoint.MergeAfterPut, crashpoint.MergeAfterCommit} {
		t.Run(point, func(t *testing.T) {
			c := newCrashEnv(t, srv, "")
			p := c.StartBinary()
			c.post(t)
			p.Stop()
			c.packedRun(t)
			p = c.StartBinary()
			c.post(t)
			p.Stop()
			c.dieAtStart(t, point)
			p = c.startAndRun(t)
			c.readAll(t)
			p.Stop()
			checkBucket(t, c.Env, c.s)
			// After the restart's run the date's rows are in one live file.
			cat := openCatalog(t, c.Env)
			var live int
			cat.DB().QueryRow(`SELECT count(*) FROM pack_files WHERE state = 'live'`).Scan(&live)
			cat.Close()
			if live != 1 {
				t.Fatalf("%d live files after the merge was done again", live)
			}
		})
	}
}

// TestKillPurgeRewrite kills the real binary at each step of the purge of
// a packed version, whose file was merged (so retired files wait for the
// reader grace): after the restart the purged vCon never comes back, the
// other reads back byte for byte, and every old file is gone.
func TestKillPurgeRewrite(t *testing.T) {
	srv := s3test.Start(t, "versitygw")
	points := []string{crashpoint.PurgeAfterKey, crashpoint.RewriteAfterPut, crashpoint.RewriteAfterCommit,
		crashpoint.ManifestAfterPut, crashpoint.RewriteAfterDelete}
	for _, point := range points {
		t.Run(point, func(t *testing.T) {
			c := newCrashEnv(t, srv, "0d")
			p := c.StartBinary()
			c.post(t)
			p.Stop()
			c.packedRun(t)
			p = c.StartBinary()
			victim := c.post(t)
			p.Stop()
			c.packedRun(t) // packs it and merges: two retired files, one live
			if n := len(keys(t, c.s, "tenants/")); n == 0 {
				t.Fatal("empty bucket")
			}
			c.dieOnDelete(t, point, victim)
			p = c.startAndRun(t)
			c.readAll(t, victim)
			p.Stop()
			checkBucket(t, c.Env, c.s)
			var files []string
			for _, k := range keys(t, c.s, "tenants/") {
				if strings.Contains(k, "/parquet/") {
					files = append(files, k)
				}
			}
			if len(files) != 1 {
				t.Fatalf("%d pack files after the purge was finished, want 1: %v", len(files), files)
			}
			if !containsPart(keys(t, c.s, "tenants/"), "/purged/") {
				t.Fatal("no tombstone for the purged version")
			}
		})
	}
}

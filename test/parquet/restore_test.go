package parquet

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// restoreFixture is a server on Parquet storage with one tenant whose
// retention is 0d, so that a DELETE purges at once.
type restoreFixture struct {
	t      *testing.T
	e      *testenv.Env
	clk    *testenv.Clock
	token  string
	bodies map[string][]byte // uuid -> body, of what must read back
}

func newRestoreFixture(t *testing.T) *restoreFixture {
	srv := s3test.Start(t, "versitygw")
	clk := testenv.NewClock(time.Now().UTC())
	e := testenv.New(t, testenv.Options{Now: clk.Now, Retention: "0d",
		Storage: srv.StorageTOML(t, srv.NewBucket(t, false), "r/") + parquetTable(3600)})
	k := e.NewKey(e.Tenant("acme"), "write", "read", "delete")
	return &restoreFixture{t: t, e: e, clk: clk, token: k.Token, bodies: map[string][]byte{}}
}

func (f *restoreFixture) store(subject string) string {
	u := ids.NewRandom().String()
	body := apitest.NewVcon(u, subject, "+15555550100")
	if r := f.e.Do("POST", "/vcons", f.token, body, "Content-Type", "application/vcon"); r.Status != 201 {
		f.t.Fatalf("POST: %d %s", r.Status, r.Body)
	}
	f.bodies[u] = body
	return u
}

func (f *restoreFixture) backup() string {
	path := filepath.Join(f.t.TempDir(), "catalog-backup.db")
	f.e.CLI("backup", "--to", path)
	return path
}

// restore puts the backup in place of the catalog, as
// docs/check-and-recovery.md does, and starts the server.
func (f *restoreFixture) restore(backup string) {
	f.e.Stop()
	cat := filepath.Join(f.e.Config.DataDir, "catalog.db")
	for _, p := range []string{cat + "-wal", cat + "-shm"} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			f.t.Fatal(err)
		}
	}
	data, err := os.ReadFile(backup)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(cat, data, 0o600); err != nil {
		f.t.Fatal(err)
	}
	if err := f.e.TryStart(); err != nil {
		f.t.Fatalf("the start after the restore: %v\n%s", err, f.e.Log.String())
	}
}

// readsBack proves every kept vCon reads back byte for byte, and check
// --deep finds nothing damaged and no problem.
func (f *restoreFixture) readsBack() {
	for u, body := range f.bodies {
		if r := f.e.Do("GET", "/vcons/"+u, f.token, nil); r.Status != 200 || !bytes.Equal(r.Body, body) {
			f.t.Errorf("%s reads %d after the restore: %s", u, r.Status, r.Body)
		}
	}
	f.e.Stop()
	out := f.e.CLI("check", "--deep")
	if !strings.Contains(out, `"damaged":[],"problems":[]`) {
		f.t.Errorf("check --deep after the restore: %s", out)
	}
}

// TestRestoreBeforePurge: a backup taken before a purge rewrote the pack
// file names the file the purge deleted. The start adopts the rewritten
// file, which holds the other rows, destroys the purged version's key
// again from its tombstone, and finishes: the purged vCon stays gone and
// the others read back.
func TestRestoreBeforePurge(t *testing.T) {
	f := newRestoreFixture(t)
	f.store("kept one")
	f.store("kept two")
	gone := f.store("purged after the backup")
	f.e.Daemon.PackRun(context.Background())
	backup := f.backup()
	if r := f.e.Do("DELETE", "/vcons/"+gone, f.token, nil); r.Status != 204 {
		t.Fatalf("DELETE: %d %s", r.Status, r.Body)
	}
	delete(f.bodies, gone)
	f.restore(backup)
	if log := f.e.Log.String(); !strings.Contains(log, "keys_destroyed_again=1") || !strings.Contains(log, "pack_files_adopted=1") {
		t.Errorf("start-up recovery after the restore:\n%s", log)
	}
	if r := f.e.Do("GET", "/vcons/"+gone, f.token, nil); r.Status != 404 {
		t.Errorf("the vCon purged after the backup reads %d", r.Status)
	}
	f.readsBack()
}

// TestRestoreBeforeMerge: a backup taken before a merge names a file the
// merge retired and reader_grace then deleted. The start adopts the
// merged file for the versions the backup knows.
func TestRestoreBeforeMerge(t *testing.T) {
	ctx := context.Background()
	f := newRestoreFixture(t)
	f.store("packed before the backup")
	f.e.Daemon.PackRun(ctx)
	backup := f.backup()
	after := f.store("stored after the backup")
	f.e.Daemon.PackRun(ctx) // packs it into a second file and merges the two
	f.clk.Advance(time.Hour)
	f.e.Daemon.PackRun(ctx) // reader_grace has passed: the merged-away files go
	delete(f.bodies, after) // its key was never in the backup
	f.restore(backup)
	if log := f.e.Log.String(); !strings.Contains(log, "pack_files_adopted=1") {
		t.Errorf("start-up recovery after the restore:\n%s", log)
	}
	f.readsBack()
}

// TestRestoreBytesNowhere: when the bytes of a restored catalog's versions
// are in no file at all (here the rewritten file is lost too), the server
// starts all the same, the purge finishes, and check names the versions
// damaged.
func TestRestoreBytesNowhere(t *testing.T) {
	f := newRestoreFixture(t)
	f.store("kept, then lost")
	gone := f.store("purged after the backup")
	f.e.Daemon.PackRun(context.Background())
	backup := f.backup()
	if r := f.e.Do("DELETE", "/vcons/"+gone, f.token, nil); r.Status != 204 {
		t.Fatalf("DELETE: %d %s", r.Status, r.Body)
	}
	s := f.e.Store()
	for _, key := range keys(t, s, "tenants/") {
		if strings.Contains(key, "/parquet/") {
			if err := s.Delete(context.Background(), key); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.restore(backup)
	if r := f.e.Do("GET", "/vcons/"+gone, f.token, nil); r.Status != 404 {
		t.Errorf("the vCon purged after the backup reads %d", r.Status)
	}
	f.e.Stop()
	out, _, code := f.e.TryCLI("check")
	if code != 1 || !strings.Contains(out, `"damaged":["`) {
		t.Errorf("check after losing the file: exit %d\n%s", code, out)
	}
}

package archive_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/seal"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/archivetest"
)

// listing is a store that counts its List calls and may run a hook
// before each.
type listing struct {
	objstore.Store
	lists  atomic.Int64
	before func(prefix string)
}

func (l *listing) List(ctx context.Context, prefix string, fn func(objstore.Info) error) error {
	l.lists.Add(1)
	if l.before != nil {
		l.before(prefix)
	}
	return l.Store.List(ctx, prefix, fn)
}

// RemoveStaleTemps passes through, as the metered store does in serve.
func (l *listing) RemoveStaleTemps(age time.Duration) (int, error) {
	return l.Store.(interface {
		RemoveStaleTemps(time.Duration) (int, error)
	}).RemoveStaleTemps(age)
}

// recoverFixture is a data directory whose catalog can be closed and
// opened again, as a restart does.
type recoverFixture struct {
	t      *testing.T
	ctx    context.Context
	dir    string
	mk     *seal.MasterKey
	cat    *catalog.Catalog
	store  *listing
	a      *archive.Archive
	tenant ids.ID
}

func newRecoverFixture(t *testing.T) *recoverFixture {
	f := &recoverFixture{t: t, ctx: context.Background(), dir: t.TempDir()}
	f.mk = archivetest.MasterKey(t, 7)
	k, err := archivetest.Make(f.ctx, f.dir, f.mk)
	if err != nil {
		t.Fatal(err)
	}
	f.tenant = k.NewTenant(t, "acme")
	k.Cat.Close()
	f.restart()
	t.Cleanup(func() { f.cat.Close() })
	return f
}

// restart opens the catalog again (closing the open one) and makes a new
// Archive over a store that counts its listings.
func (f *recoverFixture) restart() {
	f.t.Helper()
	if f.cat != nil {
		f.cat.Close()
	}
	cat, err := catalog.Open(f.ctx, f.dir)
	if err != nil {
		f.t.Fatal(err)
	}
	f.cat = cat
	d, err := objstore.NewDir(f.dir)
	if err != nil {
		f.t.Fatal(err)
	}
	f.store = &listing{Store: d}
	k := &archivetest.Kit{Dir: f.dir, Key: f.mk, Cat: cat, Tenant: f.tenant}
	f.a = k.Archive(f.t, archive.Config{Objects: f.store, Loc: catalog.InDir, DefaultRetention: 0, Now: time.Now})
}

func (f *recoverFixture) storeOne() ids.ID {
	f.t.Helper()
	uuid := ids.NewRandom()
	body := apitest.NewVcon(uuid.String(), "x", "+15555550100")
	if _, err := f.a.Store(f.ctx, archive.StoreRequest{Tenant: f.tenant, Mode: catalog.CreateOnly, Body: bytes.NewReader(body), ContentType: "application/vcon"}); err != nil {
		f.t.Fatal(err)
	}
	return uuid
}

func (f *recoverFixture) recover() archive.Recovery {
	f.t.Helper()
	rec, err := f.a.Recover(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	return rec
}

// put writes an object of the tenant under version id v, as a store that
// never committed leaves it.
func (f *recoverFixture) put(tenant, v ids.ID) string {
	f.t.Helper()
	key := archive.ObjectKey(catalog.InDir, tenant, v)
	if err := objstore.Put(f.ctx, f.store.Store, key, strings.NewReader("sealed bytes no key opens"), true); err != nil {
		f.t.Fatal(err)
	}
	return key
}

// idAt makes a version id of time t, as a store made at t would, without
// ids.NewV7, which never goes back in time within a process.
func idAt(t time.Time) ids.ID {
	id := ids.NewRandom()
	ms := uint64(t.UnixMilli())
	for i := 5; i >= 0; i-- {
		id[i] = byte(ms)
		ms >>= 8
	}
	id[6] = 0x70 | id[6]&0x0f
	return id
}

func (f *recoverFixture) exists(key string) bool {
	f.t.Helper()
	_, err := f.store.Stat(f.ctx, key)
	if err != nil && !errors.Is(err, objstore.ErrNotFound) {
		f.t.Fatal(err)
	}
	return err == nil
}

// TestRecoverListsNothing: a start with nothing pending lists no object
// and no tombstone, however many there are; only a catalog that never
// counted its purges has its tombstones read, once.
func TestRecoverListsNothing(t *testing.T) {
	f := newRecoverFixture(t)
	for i := 0; i < 3; i++ {
		f.storeOne()
	}
	// A catalog no counting server started: every tombstone is read once.
	f.recover()
	if n := f.store.lists.Load(); n == 0 {
		t.Fatal("the first start did not read the tombstones of a catalog without a purge count")
	}
	purged := f.storeOne()
	if err := f.a.Delete(f.ctx, f.tenant, purged); err != nil { // 0d: purged now
		t.Fatal(err)
	}
	orphan := f.put(f.tenant, idAt(time.Now().Add(-time.Hour))) // the look's, after the start
	for i := 0; i < 2; i++ {
		f.restart()
		if rec := f.recover(); rec != (archive.Recovery{}) {
			t.Fatalf("start %d repaired %+v with nothing pending", i, rec)
		}
		if n := f.store.lists.Load(); n != 0 {
			t.Fatalf("start %d with nothing pending listed storage %d time(s)", i, n)
		}
	}
	if !f.exists(orphan) {
		t.Fatal("the start removed an orphan: that is the look's, after the server answers")
	}
	// Storage that lost its purge count while the catalog counted purges
	// cannot tell: the start reads the tombstones and writes the count
	// again, and the start after reads nothing.
	if err := f.store.Delete(f.ctx, archive.PurgeCountKey); err != nil {
		t.Fatal(err)
	}
	f.restart()
	f.recover()
	if f.store.lists.Load() == 0 || !f.exists(archive.PurgeCountKey) {
		t.Fatalf("a start without storage's purge count: %d listing(s)", f.store.lists.Load())
	}
	f.restart()
	if f.recover(); f.store.lists.Load() != 0 {
		t.Fatal("the start after the purge count was written again listed storage")
	}
}

// TestRecoverRestoredCatalog: a catalog restored from a copy taken before
// a purge has a lower purge count than storage; the start reads every
// tombstone, destroys the key again and finishes the purge; the next start
// reads nothing.
func TestRecoverRestoredCatalog(t *testing.T) {
	f := newRecoverFixture(t)
	f.recover()
	kept := f.storeOne()
	purged := f.storeOne()
	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := f.cat.Backup(f.ctx, backup); err != nil {
		t.Fatal(err)
	}
	if err := f.a.Delete(f.ctx, f.tenant, purged); err != nil {
		t.Fatal(err)
	}
	f.cat.Close()
	f.cat = nil
	catPath := filepath.Join(f.dir, catalog.FileName)
	for _, p := range []string{catPath + "-wal", catPath + "-shm"} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(catPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f.restart()
	if vs, err := f.cat.Versions(f.ctx, f.tenant, purged); err != nil || len(vs) != 1 || vs[0].WrappedKey == nil {
		t.Fatalf("the restored catalog does not hold the purged version's key before the start: %+v %v", vs, err)
	}
	rec := f.recover()
	if rec.Tombstoned != 1 || rec.PurgesEnded != 1 {
		t.Fatalf("recovery after the restore: %+v", rec)
	}
	if f.store.lists.Load() == 0 {
		t.Fatal("the start after a restore did not read the tombstones")
	}
	if _, _, err := f.a.Open(f.ctx, f.tenant, purged); !errors.Is(err, archive.ErrNotFound) {
		t.Fatalf("a version purged after the backup opens after the restore: %v", err)
	}
	_, rc, err := f.a.Open(f.ctx, f.tenant, kept)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, rc)
	rc.Close()
	f.restart()
	if rec := f.recover(); rec != (archive.Recovery{}) || f.store.lists.Load() != 0 {
		t.Fatalf("the start after the repaired restore: %+v, %d listing(s)", rec, f.store.lists.Load())
	}
}

// TestLookOrphans: the look removes an object no row names whose version
// id is older than the start, and never one younger, nor a version's.
func TestLookOrphans(t *testing.T) {
	f := newRecoverFixture(t)
	kept := f.storeOne()
	started := time.Now()
	old := f.put(f.tenant, idAt(started.Add(-time.Hour)))
	young := f.put(f.tenant, idAt(started.Add(time.Second)))
	st, err := f.a.Look(f.ctx, started)
	if err != nil {
		t.Fatal(err)
	}
	if st.Orphans != 1 || st.PackCopies != 0 || st.Objects != 3 || st.Tenants != 1 || !st.Done {
		t.Fatalf("look: %+v", st)
	}
	if f.exists(old) {
		t.Fatal("an orphan older than the start is still there")
	}
	if !f.exists(young) {
		t.Fatal("an object younger than the start was removed")
	}
	v, err := f.cat.Current(f.ctx, f.tenant, kept)
	if err != nil {
		t.Fatal(err)
	}
	if !f.exists(archive.ObjectKey(catalog.InDir, f.tenant, v.ID)) {
		t.Fatal("the look removed a version's object")
	}
}

// stalledCommits is a store whose uploads wait, once their object is
// whole, until release is closed: a store in flight between its object
// and its row.
type stalledCommits struct {
	objstore.Store
	committed chan struct{}
	release   chan struct{}
}

func (s *stalledCommits) Upload(ctx context.Context, key string, createOnly bool) (objstore.Upload, error) {
	up, err := s.Store.Upload(ctx, key, createOnly)
	return stalledUpload{up, s}, err
}

type stalledUpload struct {
	objstore.Upload
	s *stalledCommits
}

func (u stalledUpload) Commit() error {
	err := u.Upload.Commit()
	close(u.s.committed)
	<-u.s.release
	return err
}

// TestLookStoreInFlight: the object of a store whose row is not committed
// yet is kept even when its version id is older than the start (a clock
// that went back).
func TestLookStoreInFlight(t *testing.T) {
	f := newRecoverFixture(t)
	stall := &stalledCommits{Store: f.store, committed: make(chan struct{}), release: make(chan struct{})}
	cfg := f.a.Config
	cfg.Objects = stall
	cfg.Now = func() time.Time { return time.Now().Add(-time.Hour) }
	a, err := archive.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	uuid := ids.NewRandom()
	var wg sync.WaitGroup
	var storeErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		body := apitest.NewVcon(uuid.String(), "in flight", "+15555550100")
		_, storeErr = a.Store(f.ctx, archive.StoreRequest{Tenant: f.tenant, Mode: catalog.CreateOnly, Body: bytes.NewReader(body), ContentType: "application/vcon"})
	}()
	<-stall.committed
	// Every id made so far is older than this start.
	st, err := a.Look(f.ctx, time.Now().Add(time.Hour))
	close(stall.release)
	wg.Wait()
	if err != nil || storeErr != nil {
		t.Fatal(err, storeErr)
	}
	if st.Objects != 1 || st.Orphans != 0 {
		t.Fatalf("look during a store: %+v", st)
	}
	_, rc, err := f.a.Open(f.ctx, f.tenant, uuid)
	if err != nil {
		t.Fatalf("the store that was in flight during the look: %v", err)
	}
	rc.Close()
}

// TestLookResumes: a look cut by a stop goes on, at the next start, with
// the tenant it was cut in; the tenants it finished are not listed again.
func TestLookResumes(t *testing.T) {
	f := newRecoverFixture(t)
	other, err := f.cat.NewTenant(f.ctx, "globex", catalog.CLI)
	if err != nil {
		t.Fatal(err)
	}
	first, second := f.tenant, other.ID
	if bytes.Compare(first[:], second[:]) > 0 {
		first, second = second, first
	}
	started := time.Now()
	orphanA := f.put(first, idAt(started.Add(-time.Hour)))
	orphanB := f.put(second, idAt(started.Add(-time.Hour)))
	ctx, stop := context.WithCancel(f.ctx)
	f.store.before = func(prefix string) {
		if strings.Contains(prefix, second.String()) {
			stop() // the server stops while the second tenant is listed
		}
	}
	st, err := f.a.Look(ctx, started)
	if err == nil || st.Done || st.Tenants != 1 || st.Orphans != 1 {
		t.Fatalf("a look cut in the second tenant: %+v %v", st, err)
	}
	if f.exists(orphanA) || !f.exists(orphanB) {
		t.Fatal("the cut look removed the wrong objects")
	}
	f.store.before = nil
	f.restart()
	st, err = f.a.Look(f.ctx, started)
	if err != nil || !st.Done || st.Tenants != 1 || st.Orphans != 1 {
		t.Fatalf("the look after the cut one: %+v %v", st, err)
	}
	if f.exists(orphanB) {
		t.Fatal("the resumed look left the second tenant's orphan")
	}
	// A finished pass starts again from the first tenant.
	st, err = f.a.Look(f.ctx, started)
	if err != nil || !st.Done || st.Tenants != 2 || st.Orphans != 0 {
		t.Fatalf("the next pass: %+v %v", st, err)
	}
}

package archive_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/logline"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/parquetstore"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/archivetest"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// hookStore lets a test see and disturb what the archive asks of a real
// bucket: count reads, refuse a create-only commit, skip deletes.
type hookStore struct {
	objstore.Store
	mu         sync.Mutex
	beforePut  func(key string) error // a create-only commit returns its error instead
	skipDelete func(key string) bool
	gets       atomic.Int64
	ranges     atomic.Int64
}

func (h *hookStore) Upload(ctx context.Context, key string, createOnly bool) (objstore.Upload, error) {
	u, err := h.Store.Upload(ctx, key, createOnly)
	if err != nil || !createOnly {
		return u, err
	}
	return &hookUpload{Upload: u, key: key, h: h}, nil
}

type hookUpload struct {
	objstore.Upload
	key string
	h   *hookStore
}

func (u *hookUpload) Commit() error {
	u.h.mu.Lock()
	hook := u.h.beforePut
	u.h.mu.Unlock()
	if hook != nil {
		if err := hook(u.key); err != nil {
			u.Upload.Abort()
			return err
		}
	}
	return u.Upload.Commit()
}

func (h *hookStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	h.gets.Add(1)
	return h.Store.Get(ctx, key)
}

func (h *hookStore) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	h.ranges.Add(1)
	return h.Store.GetRange(ctx, key, off, n)
}

func (h *hookStore) Delete(ctx context.Context, key string) error {
	h.mu.Lock()
	skip := h.skipDelete
	h.mu.Unlock()
	if skip != nil && skip(key) {
		return nil
	}
	return h.Store.Delete(ctx, key)
}

func (h *hookStore) setBeforePut(fn func(string) error) {
	h.mu.Lock()
	h.beforePut = fn
	h.mu.Unlock()
}

func (h *hookStore) setSkipDelete(fn func(string) bool) {
	h.mu.Lock()
	h.skipDelete = fn
	h.mu.Unlock()
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// packFixture is an archive over a real bucket with Parquet storage on.
type packFixture struct {
	t      *testing.T
	ctx    context.Context
	a      *archive.Archive
	p      *archive.Packer
	hooks  *hookStore
	bucket objstore.Store // the same bucket, undisturbed
	tenant ids.ID
	clock  *testenv.Clock
	log    *syncBuf
	bodies map[ids.ID][]byte
}

func newPackFixture(t *testing.T, srv *s3test.Server, grace time.Duration) *packFixture {
	ctx := context.Background()
	clock := testenv.NewClock(time.Date(2026, 11, 5, 12, 0, 0, 0, time.UTC))
	k := archivetest.Keyed(t, nil)
	k.Cat.Now = clock.Now
	bucket := srv.NewBucket(t, false)
	s3 := objstore.NewS3(srv.Client(t), bucket, "pfx/", t.TempDir())
	hooks := &hookStore{Store: s3}
	tenant := k.NewTenant(t, "acme")
	log := &syncBuf{}
	a := k.Archive(t, archive.Config{Objects: hooks, Loc: catalog.InS3,
		DefaultRetention: 30 * 24 * time.Hour, Now: clock.Now, Log: logline.New(log, "debug", "serve"),
		Parquet: &archive.ParquetOptions{PackLimit: 16 << 20, ReaderGrace: grace, SpoolDir: t.TempDir()}})
	return &packFixture{t: t, ctx: ctx, a: a, p: a.Packer(), hooks: hooks, bucket: objstore.NewS3(srv.Client(t), bucket, "pfx/", t.TempDir()),
		tenant: tenant, clock: clock, log: log, bodies: map[ids.ID][]byte{}}
}

// store stores n new vCons and returns their uuids.
func (f *packFixture) store(n int) []ids.ID {
	f.t.Helper()
	var out []ids.ID
	for i := 0; i < n; i++ {
		u := ids.NewRandom()
		body := apitest.NewVcon(u.String(), "packed "+u.String(), "+15555550100")
		if _, err := f.a.Store(f.ctx, archive.StoreRequest{Tenant: f.tenant, Mode: catalog.CreateOnly, Body: bytes.NewReader(body), ContentType: "application/vcon"}); err != nil {
			f.t.Fatal(err)
		}
		f.bodies[u] = body
		out = append(out, u)
	}
	return out
}

func (f *packFixture) run(wantFiles, wantVersions int) archive.PackStats {
	f.t.Helper()
	st := f.p.Run(f.ctx)
	if st.Failed != 0 || st.Files != wantFiles || st.Versions != wantVersions {
		f.t.Fatalf("pack run %+v, want files=%d versions=%d failed=0\nlog:\n%s", st, wantFiles, wantVersions, f.log.String())
	}
	return st
}

// keys lists the bucket's keys under the tenant's folder of one kind.
func (f *packFixture) keys(kind string) []string {
	f.t.Helper()
	var out []string
	prefix := "tenants/" + f.tenant.String() + "/" + kind + "/"
	if err := f.bucket.List(f.ctx, prefix, func(i objstore.Info) error { out = append(out, i.Key); return nil }); err != nil {
		f.t.Fatal(err)
	}
	return out
}

// readAll checks that every stored vCon still current reads back byte for
// byte.
func (f *packFixture) readAll(skip ...ids.ID) {
	f.t.Helper()
	gone := map[ids.ID]bool{}
	for _, s := range skip {
		gone[s] = true
	}
	for u, body := range f.bodies {
		if gone[u] {
			continue
		}
		_, rc, err := f.a.Open(f.ctx, f.tenant, u)
		if err != nil {
			f.t.Fatalf("open %s: %v", u, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, body) {
			f.t.Fatalf("%s reads %d bytes (%v), want its %d stored bytes", u, len(got), err, len(body))
		}
	}
}

func (f *packFixture) files(states ...catalog.PackState) []catalog.PackFile {
	f.t.Helper()
	fs, err := f.a.Cat.PackFiles(f.ctx, f.tenant, states...)
	if err != nil {
		f.t.Fatal(err)
	}
	return fs
}

// newestManifest reads the newest manifest in the bucket.
func (f *packFixture) newestManifest() (string, archive.Manifest) {
	f.t.Helper()
	keys := f.keys("manifest")
	if len(keys) == 0 {
		f.t.Fatal("no manifest in the bucket")
	}
	key := keys[len(keys)-1]
	rc, err := f.bucket.Get(f.ctx, key)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rc.Close()
	var m archive.Manifest
	if err := json.NewDecoder(rc).Decode(&m); err != nil {
		f.t.Fatal(err)
	}
	return key, m
}

// checkManifest checks that the newest manifest names exactly the live
// files and the live packed versions, and that each file holds the rows it
// says.
func (f *packFixture) checkManifest() archive.Manifest {
	f.t.Helper()
	key, m := f.newestManifest()
	if m.Format != 1 || !strings.HasSuffix(key, "/"+pad20(m.Seq)+".json") {
		f.t.Fatalf("manifest %s: format %d seq %d", key, m.Format, m.Seq)
	}
	live := f.files(catalog.PackLive)
	if len(m.Files) != len(live) {
		f.t.Fatalf("manifest names %d files, the catalog has %d live", len(m.Files), len(live))
	}
	inFiles := map[string]bool{}
	for _, mf := range m.Files {
		full := "tenants/" + f.tenant.String() + "/" + mf.Path
		data := f.get(full)
		if int64(len(data)) != mf.Bytes {
			f.t.Fatalf("%s: %d bytes, the manifest says %d", mf.Path, len(data), mf.Bytes)
		}
		n := int64(0)
		err := parquetstore.ReadPackRows(bytes.NewReader(data), int64(len(data)), func(v ids.ID, _ time.Time, _ parquetstore.Location) error {
			inFiles[v.Hex()] = true
			n++
			return nil
		})
		if err != nil || n != mf.Rows {
			f.t.Fatalf("%s: %d rows (%v), the manifest says %d", mf.Path, n, err, mf.Rows)
		}
	}
	for _, id := range m.Live {
		if len(id) != 32 || strings.ToLower(id) != id || !inFiles[id] {
			f.t.Fatalf("live version %q is not in the manifest's files", id)
		}
	}
	return m
}

func (f *packFixture) get(key string) []byte {
	f.t.Helper()
	rc, err := f.bucket.Get(f.ctx, key)
	if err != nil {
		f.t.Fatalf("get: %v", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func pad20(n int64) string {
	s := "00000000000000000000" + itoa(n)
	return s[len(s)-20:]
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestPackMergePurge is the seed's scenario at the archive level, on each
// real S3 server: pack, a second store, pack and merge into a third file,
// reads by one ranged GET, then a purge that leaves one file.
func TestPackMergePurge(t *testing.T) {
	s3test.ForEach(t, func(t *testing.T, srv *s3test.Server) {
		f := newPackFixture(t, srv, 15*time.Minute)
		first := f.store(5)
		f.run(1, 5)
		if n := len(f.keys("objects")); n != 0 {
			t.Fatalf("%d objects left after the pack run", n)
		}
		if fs := f.files(); len(fs) != 1 || fs[0].State != catalog.PackLive || fs[0].Rows != 5 || fs[0].Date != "2026-11-05" {
			t.Fatalf("pack files: %+v", fs)
		}
		key := f.keys("parquet")[0]
		if !strings.HasPrefix(key, "tenants/"+f.tenant.String()+"/parquet/date=2026-11-05/part-") || !strings.HasSuffix(key, ".parquet") {
			t.Fatalf("pack file key %s", key)
		}
		f.hooks.gets.Store(0)
		f.hooks.ranges.Store(0)
		f.readAll()
		if g, r := f.hooks.gets.Load(), f.hooks.ranges.Load(); g != 0 || r != 5 {
			t.Fatalf("5 reads of packed versions made %d GETs and %d ranged GETs, want 0 and 5", g, r)
		}
		if m := f.checkManifest(); m.Seq != 1 || len(m.Live) != 5 {
			t.Fatalf("first manifest: %+v", m)
		}
		// A run with nothing to do writes nothing.
		f.run(0, 0)
		if n := len(f.keys("manifest")); n != 1 {
			t.Fatalf("%d manifests after an idle run", n)
		}

		second := f.store(1)
		st := f.run(1, 1)
		if st.Merged != 1 {
			t.Fatalf("the second run merged %d files, want 1", st.Merged)
		}
		if n := len(f.keys("parquet")); n != 3 {
			t.Fatalf("%d files under parquet/, want 3 (two retired, one merged)", n)
		}
		if live, retired := f.files(catalog.PackLive), f.files(catalog.PackRetired); len(live) != 1 || len(retired) != 2 || live[0].Rows != 6 {
			t.Fatalf("after the merge: live %+v, retired %+v", live, retired)
		}
		f.readAll()
		if m := f.checkManifest(); len(m.Live) != 6 || len(m.Files) != 1 {
			t.Fatalf("manifest after the merge: %+v", m)
		}

		// A 0d purge of the second vCon: one file left, rewritten without
		// its row; the retired files and the older manifests go at once.
		f.a.DefaultRetention = 0
		if err := f.a.Delete(f.ctx, f.tenant, second[0]); err != nil {
			t.Fatalf("delete: %v\n%s", err, f.log.String())
		}
		keys := f.keys("parquet")
		if len(keys) != 1 {
			t.Fatalf("%d files after the purge, want 1", len(keys))
		}
		if fs := f.files(); len(fs) != 1 || fs[0].Rows != 5 || fs[0].State != catalog.PackLive {
			t.Fatalf("pack files after the purge: %+v", fs)
		}
		if n := len(f.keys("manifest")); n != 1 {
			t.Fatalf("%d manifests after the purge, want 1", n)
		}
		m := f.checkManifest()
		if len(m.Live) != 5 {
			t.Fatalf("live after the purge: %d", len(m.Live))
		}
		f.readAll(second[0])
		if purging, _ := f.a.Cat.Purging(f.ctx); len(purging) != 0 {
			t.Fatalf("%d purges unfinished", len(purging))
		}
		if n := len(f.keys("purged")); n != 1 {
			t.Fatalf("%d tombstones", n)
		}

		// Purging every other row leaves no file at all.
		for _, u := range first {
			if err := f.a.Delete(f.ctx, f.tenant, u); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(f.keys("parquet")); n != 0 {
			t.Fatalf("%d files after every row was purged", n)
		}
		if fs := f.files(); len(fs) != 0 {
			t.Fatalf("pack files: %+v", fs)
		}
		if m := f.checkManifest(); len(m.Files) != 0 || len(m.Live) != 0 {
			t.Fatalf("manifest after every purge: %+v", m)
		}
	})
}

// TestReplacedVersionsStayHidden: a replaced or deleted version is packed
// too, hidden, and leaves the manifest's live list, which a run writes
// anew when only the live versions changed.
func TestReplacedVersionsStayHidden(t *testing.T) {
	f := newPackFixture(t, s3test.Start(t, "versitygw"), time.Hour)
	u := f.store(2)
	f.run(1, 2)
	body := apitest.NewVcon(u[0].String(), "second version", "+15555550100")
	if _, err := f.a.Store(f.ctx, archive.StoreRequest{Tenant: f.tenant, UUID: &u[0], Mode: catalog.Replace, Body: bytes.NewReader(body), ContentType: "application/vcon"}); err != nil {
		t.Fatal(err)
	}
	f.bodies[u[0]] = body
	if err := f.a.Delete(f.ctx, f.tenant, u[1]); err != nil {
		t.Fatal(err)
	}
	delete(f.bodies, u[1])
	// A run with no object to pack still sees the live versions change.
	seqBefore := f.checkManifest().Seq
	st := f.run(1, 1)
	if st.Merged != 1 {
		t.Fatalf("merged %d", st.Merged)
	}
	m := f.checkManifest()
	if m.Seq <= seqBefore || len(m.Live) != 1 {
		t.Fatalf("manifest %d live %v", m.Seq, m.Live)
	}
	vs, err := f.a.Versions(f.ctx, f.tenant, u[0])
	if err != nil || len(vs) != 2 || vs[1].Location != catalog.Packed {
		t.Fatalf("versions: %+v %v", vs, err)
	}
	if live := f.files(catalog.PackLive); len(live) != 1 || live[0].Rows != 3 {
		t.Fatalf("the hidden versions stay in the file: %+v", live)
	}
	f.readAll()
	// Only the delete changes the live list: a run writes a new manifest.
	if err := f.a.Delete(f.ctx, f.tenant, u[0]); err != nil {
		t.Fatal(err)
	}
	delete(f.bodies, u[0])
	f.run(0, 0)
	if m := f.checkManifest(); len(m.Live) != 0 || len(m.Files) != 1 {
		t.Fatalf("manifest after the last delete: %+v", m)
	}
}

// TestReaderGrace: a reader holding the manifest before a merge can read
// every file it names until reader_grace has passed since the newer
// manifest; then the retired files and the old manifests go.
func TestReaderGrace(t *testing.T) {
	f := newPackFixture(t, s3test.Start(t, "versitygw"), 900*time.Second)
	f.store(3)
	f.run(1, 3)
	f.store(2)
	// This run packs the two into a second file (a manifest naming both
	// small files: the old reader's view), then merges them (a newer one).
	f.run(1, 2)
	keys := f.keys("manifest")
	if len(keys) < 3 {
		t.Fatalf("manifests %v", keys)
	}
	var old archive.Manifest
	if err := json.Unmarshal(f.get(keys[len(keys)-2]), &old); err != nil || len(old.Files) != 2 {
		t.Fatalf("the manifest before the merge: %+v %v", old, err)
	}
	readOld := func() error {
		for _, mf := range old.Files {
			if _, err := f.bucket.Stat(f.ctx, "tenants/"+f.tenant.String()+"/"+mf.Path); err != nil {
				return err
			}
		}
		_, err := f.bucket.Stat(f.ctx, keys[len(keys)-2])
		return err
	}
	for _, step := range []time.Duration{0, 300 * time.Second, 599 * time.Second} {
		f.clock.Advance(step)
		f.run(0, 0)
		if err := readOld(); err != nil {
			t.Fatalf("%v into the grace: %v", step, err)
		}
	}
	f.clock.Advance(time.Second)
	st := f.run(0, 0)
	if st.Dropped == 0 {
		t.Fatalf("nothing dropped once the grace ended: %+v", st)
	}
	if err := readOld(); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("the old manifest's files after the grace: %v", err)
	}
	if n := len(f.keys("parquet")); n != 1 {
		t.Fatalf("%d files after the grace", n)
	}
	if n := len(f.keys("manifest")); n != 1 {
		t.Fatalf("%d manifests after the grace", n)
	}
	if fs := f.files(catalog.PackRetired); len(fs) != 0 {
		t.Fatalf("retired files still recorded: %+v", fs)
	}
	f.readAll()
	f.checkManifest()
}

// TestManifestAdoption: a manifest PUT whose record a crash lost is adopted
// on the next try, not written again; a number someone else's manifest
// took is skipped.
func TestManifestAdoption(t *testing.T) {
	f := newPackFixture(t, s3test.Start(t, "versitygw"), time.Hour)
	f.store(2)
	f.run(1, 2)
	// Forget manifest 1 in the catalog, as a crash between its PUT and its
	// record would.
	if _, err := f.a.Cat.DB().Exec(`DELETE FROM manifests`); err != nil {
		t.Fatal(err)
	}
	f.run(0, 0)
	if keys := f.keys("manifest"); len(keys) != 1 {
		t.Fatalf("manifests after adoption: %v", keys)
	}
	ms, _ := f.a.Cat.Manifests(f.ctx, f.tenant)
	if len(ms) != 1 || ms[0].Seq != 1 {
		t.Fatalf("recorded: %+v", ms)
	}
	// A foreign object under the next number: the next manifest skips it.
	if err := objstore.Put(f.ctx, f.bucket, archive.ManifestKey(f.tenant, 2), strings.NewReader(`{"format":1,"seq":2,"files":[],"live":[]}`), true); err != nil {
		t.Fatal(err)
	}
	f.store(1)
	f.run(1, 1)
	m := f.checkManifest()
	if m.Seq < 3 {
		t.Fatalf("newest manifest %d, want 3 or more", m.Seq)
	}
}

// TestNameTaken: a create-only PUT refused with 412 stops the run, logs the
// seed's line and removes the pending row; the objects stay readable.
func TestNameTaken(t *testing.T) {
	f := newPackFixture(t, s3test.Start(t, "versitygw"), time.Hour)
	f.store(3)
	f.hooks.setBeforePut(func(key string) error {
		if strings.Contains(key, "/parquet/") {
			return objstore.ErrExists
		}
		return nil
	})
	st := f.p.Run(f.ctx)
	if st.Failed != 1 || st.Files != 0 {
		t.Fatalf("run %+v", st)
	}
	if !strings.Contains(f.log.String(), "ERROR vcon_server::serve: a pack file's new name was already taken; the pack run stops\n") {
		t.Fatalf("log:\n%s", f.log.String())
	}
	if fs := f.files(); len(fs) != 0 {
		t.Fatalf("pack files: %+v", fs)
	}
	f.readAll()
	f.hooks.setBeforePut(nil)
	f.run(1, 3)
	f.readAll()
}

// TestStillThere: a bucket that answers a DELETE but keeps the file leaves
// the purge undone, logged with the seed's line, and a 0d DELETE reports
// it; the next sweep finishes once the bucket behaves.
func TestStillThere(t *testing.T) {
	f := newPackFixture(t, s3test.Start(t, "versitygw"), time.Hour)
	u := f.store(3)
	f.run(1, 3)
	f.a.DefaultRetention = 0
	f.hooks.setSkipDelete(func(key string) bool { return strings.Contains(key, "/parquet/") })
	if err := f.a.Delete(f.ctx, f.tenant, u[0]); !errors.Is(err, archive.ErrPurgeIncomplete) {
		t.Fatalf("delete: %v", err)
	}
	if !strings.Contains(f.log.String(), "ERROR vcon_server::serve: the storage still holds a pack file it was told to delete\n") {
		t.Fatalf("log:\n%s", f.log.String())
	}
	if _, _, err := f.a.Open(f.ctx, f.tenant, u[0]); !errors.Is(err, archive.ErrNotFound) {
		t.Fatalf("the purged vCon opens: %v", err)
	}
	if purging, _ := f.a.Cat.Purging(f.ctx); len(purging) != 1 {
		t.Fatalf("purging %d, want 1 left undone", len(purging))
	}
	f.readAll(u[0])
	f.hooks.setSkipDelete(nil)
	if n, err := f.a.Sweep(f.ctx); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if n := len(f.keys("parquet")); n != 1 {
		t.Fatalf("%d files", n)
	}
	f.readAll(u[0])
	f.checkManifest()
}

// TestRewriteRounds: a purge whose file another purge keeps changing
// starts again, at most 4 rounds, then leaves it to the next sweep.
func TestRewriteRounds(t *testing.T) {
	f := newPackFixture(t, s3test.Start(t, "versitygw"), time.Hour)
	u := f.store(8)
	f.run(1, 8)
	vid := func(uuid ids.ID) ids.ID {
		vs, err := f.a.Cat.Versions(f.ctx, f.tenant, uuid)
		if err != nil {
			t.Fatal(err)
		}
		return vs[0].ID
	}
	var versions []ids.ID
	for _, x := range u {
		versions = append(versions, vid(x))
	}
	// Hide them all; purges come one at a time.
	for _, x := range u {
		if err := f.a.Delete(f.ctx, f.tenant, x); err != nil {
			t.Fatal(err)
		}
	}
	f.a.DefaultRetention = 0
	next := 1
	f.hooks.setBeforePut(func(key string) error {
		if !strings.Contains(key, "/parquet/") || next >= len(versions) {
			return nil
		}
		// Another purge destroys a key while the rewrite is written.
		id := versions[next]
		next++
		return f.a.Cat.Update(f.ctx, func(tx *catalog.Tx) error {
			_, err := tx.DestroyKeys([]ids.ID{id}, 0)
			return err
		})
	})
	n, err := f.a.Purge(f.ctx, versions[:1])
	if n != 1 || err == nil {
		t.Fatalf("purge: %d %v", n, err)
	}
	if next != 5 {
		t.Fatalf("%d rounds", next-1)
	}
	if !strings.Contains(f.log.String(), "WARN vcon_server::serve: purges left pack files to rewrite after 4 rounds\n") {
		t.Fatalf("log:\n%s", f.log.String())
	}
	f.hooks.setBeforePut(nil)
	// The sweep finishes the five purges and starts no other.
	f.a.DefaultRetention = 30 * 24 * time.Hour
	if _, err := f.a.Sweep(f.ctx); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if purging, _ := f.a.Cat.Purging(f.ctx); len(purging) != 0 {
		t.Fatalf("%d purges unfinished", len(purging))
	}
	if n := len(f.keys("parquet")); n != 1 {
		t.Fatalf("%d files", n)
	}
	if fs := f.files(); len(fs) != 1 || fs[0].Rows != 3 {
		t.Fatalf("files %+v", fs)
	}
	if n := len(f.keys("purged")); n != 5 {
		t.Fatalf("%d tombstones", n)
	}
}

// TestRecoverPending: a pending file (a run cut off after its PUT) is
// deleted at start with the seed's line; an object of a packed version is
// deleted by the look after the start; a file no row names is left alone.
func TestRecoverPending(t *testing.T) {
	f := newPackFixture(t, s3test.Start(t, "versitygw"), time.Hour)
	u := f.store(2)
	f.run(1, 2)
	// A pending file, as a run cut off after the PUT leaves it.
	pid := ids.NewV7(f.clock.Now())
	pkey := archive.PackKey(f.tenant, "2026-11-05", pid)
	if err := objstore.Put(f.ctx, f.bucket, pkey, strings.NewReader("not yet recorded"), true); err != nil {
		t.Fatal(err)
	}
	err := f.a.Cat.Update(f.ctx, func(tx *catalog.Tx) error {
		return tx.AddPendingPack(catalog.PackFile{ID: pid, Tenant: f.tenant, Date: "2026-11-05", Key: pkey})
	})
	if err != nil {
		t.Fatal(err)
	}
	// An unnamed file: never deleted automatically.
	ukey := archive.PackKey(f.tenant, "2026-11-04", ids.NewV7(f.clock.Now()))
	if err := objstore.Put(f.ctx, f.bucket, ukey, strings.NewReader("unknown"), true); err != nil {
		t.Fatal(err)
	}
	// The object of a packed version, as a run cut off before its deletes
	// leaves it.
	v, err := f.a.Cat.Current(f.ctx, f.tenant, u[0])
	if err != nil {
		t.Fatal(err)
	}
	okey := archive.ObjectKey(catalog.InS3, f.tenant, v.ID)
	if err := objstore.Put(f.ctx, f.bucket, okey, strings.NewReader("copy"), true); err != nil {
		t.Fatal(err)
	}
	rec, err := f.a.Recover(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rec.PackFiles != 1 {
		t.Fatalf("recovery %+v", rec)
	}
	// The object of the packed version is the look's, after the start.
	if _, err := f.bucket.Stat(f.ctx, okey); err != nil {
		t.Fatalf("the start removed the object of a packed version: %v", err)
	}
	// After every id made so far: ids.NewV7 never goes back in time.
	started := f.clock.Now()
	if now := time.Now(); now.After(started) {
		started = now
	}
	st, err := f.a.Look(f.ctx, started.Add(time.Second))
	if err != nil || st.PackCopies != 1 || st.Orphans != 0 || !st.Done {
		t.Fatalf("look %+v %v", st, err)
	}
	if !strings.Contains(f.log.String(), "INFO vcon_server::serve: start-up recovery removed pack files that no catalog row names removed=1\n") {
		t.Fatalf("log:\n%s", f.log.String())
	}
	if _, err := f.bucket.Stat(f.ctx, pkey); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("pending file: %v", err)
	}
	if _, err := f.bucket.Stat(f.ctx, okey); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("object of a packed version: %v", err)
	}
	if _, err := f.bucket.Stat(f.ctx, ukey); err != nil {
		t.Fatalf("a file no row names was deleted: %v", err)
	}
	if unnamed, err := f.a.UnnamedPackFiles(f.ctx, f.tenant); err != nil || len(unnamed) != 1 || unnamed[0] != ukey {
		t.Fatalf("unnamed pack files: %v %v", unnamed, err)
	}
	f.readAll()
}

// TestAbandonedCommits: a purge that starts while a pack run or a merge
// writes its file makes the commit refuse; the new file is deleted, its
// pending row removed, and the next run packs or merges what is left.
func TestAbandonedCommits(t *testing.T) {
	f := newPackFixture(t, s3test.Start(t, "versitygw"), time.Hour)
	u := f.store(3)
	for _, x := range u[:2] {
		if err := f.a.Delete(f.ctx, f.tenant, x); err != nil { // hidden, kept 30 days
			t.Fatal(err)
		}
	}
	destroyOnPut := func(uuid ids.ID) {
		vs, err := f.a.Cat.Versions(f.ctx, f.tenant, uuid)
		if err != nil {
			t.Fatal(err)
		}
		id := vs[0].ID
		f.hooks.setBeforePut(func(key string) error {
			if !strings.Contains(key, "/parquet/") {
				return nil
			}
			f.hooks.setBeforePut(nil)
			return f.a.Cat.Update(f.ctx, func(tx *catalog.Tx) error {
				_, err := tx.DestroyKeys([]ids.ID{id}, 0)
				return err
			})
		})
	}
	// The pack run: the file is abandoned.
	destroyOnPut(u[0])
	st := f.p.Run(f.ctx)
	if st.Failed != 0 || st.Files != 0 || st.Versions != 0 {
		t.Fatalf("run %+v", st)
	}
	if keys := f.keys("parquet"); len(keys) != 0 {
		t.Fatalf("an abandoned file stayed: %v", keys)
	}
	if fs := f.files(); len(fs) != 0 {
		t.Fatalf("pack files %+v", fs)
	}
	// The purge is finished as an object's; the next run packs the rest.
	if _, err := f.a.Sweep(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.run(1, 2)
	delete(f.bodies, u[0])
	delete(f.bodies, u[1])
	f.readAll()

	// A merge: a purge starts on a row of a source file meanwhile.
	f.store(1)
	destroyOnPut(u[1])
	// The new object's file is written first: let it pass, then hook the
	// merge's file.
	var puts atomic.Int64
	inner := f.hooks.beforePut
	f.hooks.setBeforePut(func(key string) error {
		if strings.Contains(key, "/parquet/") && puts.Add(1) == 1 {
			return nil
		}
		if inner == nil {
			return nil
		}
		return inner(key)
	})
	st = f.p.Run(f.ctx)
	if st.Failed != 0 || st.Files != 1 || st.Merged != 0 {
		t.Fatalf("run %+v\n%s", st, f.log.String())
	}
	if live := f.files(catalog.PackLive); len(live) != 2 {
		t.Fatalf("live files after an abandoned merge: %+v", live)
	}
	if fs := f.files(catalog.PackPending, catalog.PackRetired); len(fs) != 0 {
		t.Fatalf("pending or retired files after an abandoned merge: %+v", fs)
	}
	if n := len(f.keys("parquet")); n != 2 {
		t.Fatalf("%d files after an abandoned merge", n)
	}
	f.hooks.setBeforePut(nil)
	// The sweep rewrites the file without the purged row; the next run
	// merges.
	if _, err := f.a.Sweep(f.ctx); err != nil {
		t.Fatal(err)
	}
	st = f.run(0, 0)
	if st.Merged != 1 {
		t.Fatalf("run after the sweep %+v", st)
	}
	f.readAll()
	f.checkManifest()
}

// TestPackLimitsAndDates: an object over pack_limit stays an object; each
// UTC day gets its own file, the oldest packed first; a day with more than
// MaxFileBytes of objects is split.
func TestPackLimitsAndDates(t *testing.T) {
	f := newPackFixture(t, s3test.Start(t, "versitygw"), time.Hour)
	c := f.a.Config
	c.Parquet = &archive.ParquetOptions{PackLimit: 2048, ReaderGrace: time.Hour, SpoolDir: t.TempDir(), MaxFileBytes: 600}
	a, err := archive.New(c)
	if err != nil {
		t.Fatal(err)
	}
	f.a, f.p = a, a.Packer()
	big := ids.NewRandom()
	body := append(apitest.NewVcon(big.String(), "big", "+15555550100"), bytes.Repeat([]byte(" "), 4096)...)
	if _, err := f.a.Store(f.ctx, archive.StoreRequest{Tenant: f.tenant, Mode: catalog.CreateOnly, Body: bytes.NewReader(body), ContentType: "application/vcon"}); err != nil {
		t.Fatal(err)
	}
	f.bodies[big] = body
	f.store(1) // 2026-11-05
	f.clock.Advance(24 * time.Hour)
	f.store(4) // 2026-11-06: about 300 sealed bytes each, so two files of two
	st := f.p.Run(f.ctx)
	if st.Failed != 0 || st.Versions != 5 || st.Files != 3 {
		t.Fatalf("run %+v\n%s", st, f.log.String())
	}
	if objects := f.keys("objects"); len(objects) != 1 {
		t.Fatalf("objects left: %v, want the big one", objects)
	}
	v, err := f.a.Cat.Current(f.ctx, f.tenant, big)
	if err != nil || v.Location != catalog.InS3 {
		t.Fatalf("the big vCon: %s %v", v.Location, err)
	}
	dates := map[string]int{}
	for _, pf := range f.files() {
		dates[pf.Date]++
	}
	if dates["2026-11-05"] < 1 || dates["2026-11-06"] < 2 {
		t.Fatalf("files by date: %v", dates)
	}
	f.readAll()
	f.checkManifest()
}

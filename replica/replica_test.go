package replica

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/seal"
	"github.com/vcon-server/vcon-server/test/kit/archivetest"
)

type fixture struct {
	t     *testing.T
	ctx   context.Context
	dir   string
	cat   *catalog.Catalog
	key   *seal.MasterKey
	store objstore.Store
	rep   *Replica
	n     int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	k := archivetest.Keyed(t, archivetest.MasterKey(t, 0))
	dir, key, cat := k.Dir, k.Key, k.Cat
	target := t.TempDir()
	store, err := objstore.NewDir(target)
	if err != nil {
		t.Fatal(err)
	}
	rep := New(Config{Store: store, Cat: cat, Key: key, DataDir: dir})
	if err := rep.Enable(ctx); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ctx: ctx, dir: dir, cat: cat, key: key, store: store, rep: rep}
}

var tenant = ids.ID{1}

// add stores n versions of new vCons (and a tenant first), straight in SQL.
func (f *fixture) add(n int) []ids.ID {
	f.t.Helper()
	tx, err := f.cat.DB().BeginTx(f.ctx, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	defer tx.Rollback()
	stmt := func(q string) func(args ...any) {
		st, err := tx.PrepareContext(f.ctx, q)
		if err != nil {
			f.t.Fatal(err)
		}
		return func(args ...any) {
			if _, err := st.ExecContext(f.ctx, args...); err != nil {
				f.t.Fatal(err)
			}
		}
	}
	if f.n == 0 {
		stmt(`INSERT INTO tenants(id, name, created_at) VALUES (?, 'acme', 1)`)(tenant[:])
	}
	version := stmt(`INSERT INTO versions(id, tenant, uuid, stored_at, content_type, content_encoding, form, size, sealed_size, wrapped_key, location)
		VALUES (?, ?, ?, ?, 'application/json', '', 'unsigned', 10, 20, ?, 'dir')`)
	vcon := stmt(`INSERT INTO vcons(tenant, uuid, current) VALUES (?, ?, ?)`)
	audit := stmt(`INSERT INTO audit(tenant, at, actor, label, action, status) VALUES (?, ?, 'k', 'l', 'store', 201)`)
	var out []ids.ID
	for range n {
		f.n++
		v, u := ids.NewV7(time.Now()), ids.NewRandom() // version ids sort by time, as the server's do
		version(v[:], tenant[:], u[:], f.n, []byte(fmt.Sprintf("key-%d", f.n)))
		vcon(tenant[:], u[:], v[:])
		audit(tenant[:], f.n)
		out = append(out, v)
	}
	if err := tx.Commit(); err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *fixture) exec(db *sql.DB, q string, args ...any) {
	f.t.Helper()
	if _, err := db.ExecContext(f.ctx, q, args...); err != nil {
		f.t.Fatal(err)
	}
}

// dump reads every carried table of the catalog file at path.
func dump(t *testing.T, path string) map[string][]string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string][]string{}
	for _, name := range []string{"tenants", "keys", "vcons", "versions", "audit", "admin_log", "meta", "pack_files", "manifests"} {
		q := `SELECT * FROM ` + name + ` ORDER BY 1, 2`
		if name == "admin_log" {
			q = `SELECT * FROM admin_log WHERE action NOT LIKE 'catalog\_restore%' ESCAPE '\' ORDER BY 1, 2` // the restore's own records
		}
		if name == "meta" {
			q = `SELECT * FROM meta WHERE key NOT IN ('restored', 'log_restored') ORDER BY 1` // the restore's own marks
		}
		rows, err := db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			out[name] = append(out[name], fmt.Sprintf("%v", vals))
		}
		rows.Close()
	}
	return out
}

func (f *fixture) restoreMatches() Restored {
	f.t.Helper()
	path := filepath.Join(f.t.TempDir(), "restored.db")
	res, err := Restore(f.ctx, f.store, f.key, path, Options{})
	if err != nil {
		f.t.Fatal(err)
	}
	want, got := dump(f.t, f.cat.Path()), dump(f.t, path)
	if !reflect.DeepEqual(want, got) {
		for k := range want {
			if !reflect.DeepEqual(want[k], got[k]) {
				f.t.Errorf("table %s: %d rows in the catalog, %d restored", k, len(want[k]), len(got[k]))
			}
		}
		f.t.Fatal("the restored catalog differs")
	}
	return res
}

// keys lists the objects of the generations: every one but the head,
// which every cut rewrites.
func (f *fixture) keys() map[string]bool {
	f.t.Helper()
	out := map[string]bool{}
	err := f.store.List(f.ctx, root, func(in objstore.Info) error {
		if in.Key != headKey {
			out[in.Key] = true
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func TestSyncAndRestore(t *testing.T) {
	f := newFixture(t)
	f.add(10)
	if err := f.rep.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	if g := f.rep.Status().Generation; g != 1 {
		t.Fatalf("generation %d after the first sync, want 1", g)
	}
	f.restoreMatches()
	for range 3 {
		f.add(5)
		if err := f.rep.Sync(f.ctx); err != nil {
			t.Fatal(err)
		}
	}
	f.exec(f.cat.DB(), `DELETE FROM audit WHERE id = 3`)
	f.exec(f.cat.DB(), `UPDATE tenants SET name = 'renamed'`)
	if err := f.rep.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	res := f.restoreMatches()
	if res.Segments != 4 || res.Generation != 1 {
		t.Fatalf("restored %+v, want generation 1 and 4 segments", res)
	}
}

func TestForgetRewritesOnlyWhatHeldTheKey(t *testing.T) {
	f := newFixture(t)
	vs := f.add(3 * shardRows)
	if err := f.rep.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.add(10)
	if err := f.rep.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	before := f.keys()
	// Destroy the key of a version in the first shard of versions.
	f.exec(f.cat.DB(), `UPDATE versions SET wrapped_key = NULL, purge = 1 WHERE id = ?`, vs[5][:])
	if err := f.rep.Forget(f.ctx); err != nil {
		t.Fatal(err)
	}
	after := f.keys()
	kept := 0
	for k := range before {
		if after[k] {
			kept++
			if !strings.Contains(k, "/shard-") {
				t.Errorf("%s outlived the rollover", k)
			}
		}
	}
	st, _ := f.rep.loadState(f.ctx)
	var versionShards int
	for _, tb := range st.Tables {
		if tb.Name == "versions" {
			versionShards = len(tb.Shards)
		}
	}
	if versionShards < 3 {
		t.Fatalf("versions in %d shards, want 3 or more", versionShards)
	}
	if kept == 0 {
		t.Fatal("the rollover kept no shard: it cut everything again")
	}
	// Which versions shard now holds vs[5]: it must be of the new generation.
	i, _ := shardOf(tablesByName(st)["versions"].Shards, []any{vs[5][:]})
	if sh := tablesByName(st)["versions"].Shards[i]; before[sh.Key] {
		t.Fatalf("the shard holding the destroyed key, %s, was kept", sh.Key)
	}
	f.restoreMatches()
	// A second rollover with nothing to forget keeps it all but the fold.
	if err := f.rep.Forget(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.restoreMatches()
}

func tablesByName(st *state) map[string]table {
	m := map[string]table{}
	for _, t := range st.Tables {
		m[t.Name] = t
	}
	return m
}

func TestCompactAndRotate(t *testing.T) {
	f := newFixture(t)
	f.add(100)
	if err := f.rep.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.add(100)
	if err := f.rep.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	unlock, _ := f.rep.lock(f.ctx)
	st, _ := f.rep.loadState(f.ctx)
	err := f.rep.rollover(f.ctx, st, compact)
	unlock()
	if err != nil {
		t.Fatal(err)
	}
	var logged int
	f.cat.DB().QueryRow(`SELECT count(*) FROM replica_log`).Scan(&logged)
	if logged != 0 {
		t.Fatalf("%d log entries after a compaction, want 0", logged)
	}
	f.restoreMatches()
	if err := f.rep.Rotate(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.restoreMatches()
	for k := range f.keys() {
		if g, _, _, _, _ := parseKey(k); g != f.rep.Status().Generation {
			t.Fatalf("%s outlived a whole rollover", k)
		}
	}
}

// noManifest is a target that refuses manifests, as one that fails in
// the middle of a rollover.
type noManifest struct{ objstore.Store }

func (s noManifest) Upload(ctx context.Context, key string, createOnly bool) (objstore.Upload, error) {
	if strings.HasSuffix(key, "/manifest") {
		return nil, errors.New("manifest refused")
	}
	return s.Store.Upload(ctx, key, createOnly)
}

// TestPendingRolloverIsAbandoned: a rollover cut off before its record
// (here its manifest refused) is abandoned, not written whole again: the
// next step deletes what it wrote and cuts a segment of the record's
// generation; the next rollover takes a new number.
func TestPendingRolloverIsAbandoned(t *testing.T) {
	f := newFixture(t)
	f.add(20)
	if err := f.rep.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.add(5)
	f.rep.cfg.Store = noManifest{f.store}
	if err := f.rep.Forget(f.ctx); err == nil {
		t.Fatal("a rollover without its manifest succeeded")
	}
	f.rep.cfg.Store = f.store
	st, _ := f.rep.loadState(f.ctx)
	cut := 0
	for k := range f.keys() {
		if g, _, _, _, _ := parseKey(k); g == 2 {
			cut++
		}
	}
	if st.Pending != 2 || cut == 0 {
		t.Fatalf("after the cut-off rollover: pending %d, %d objects of generation 2", st.Pending, cut)
	}
	f.add(1)
	if err := f.rep.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	if g := f.rep.Status().Generation; g != 1 {
		t.Fatalf("generation %d, want 1: the cut-off rollover abandoned, not a whole generation", g)
	}
	for k := range f.keys() {
		if g, _, _, _, _ := parseKey(k); g != 1 {
			t.Fatalf("%s outlived the abandoned rollover", k)
		}
	}
	f.restoreMatches()
	if err := f.rep.Forget(f.ctx); err != nil {
		t.Fatal(err)
	}
	if g := f.rep.Status().Generation; g != 3 {
		t.Fatalf("generation %d after the next rollover, want 3 (2 was used)", g)
	}
	f.restoreMatches()
}

func TestCompareMatchesSQLite(t *testing.T) {
	vals := []any{nil, int64(-3), 2.5, int64(7), "a", "b", []byte{0}, []byte{1, 2}}
	for i := range vals {
		for j := range vals {
			got := compare(vals[i], vals[j])
			if (i < j && got >= 0) || (i > j && got <= 0) || (i == j && got != 0) {
				t.Fatalf("compare(%v, %v) = %d", vals[i], vals[j], got)
			}
		}
	}
}

func TestAnotherCatalogsReplicaIsLeftAlone(t *testing.T) {
	f := newFixture(t)
	f.add(5)
	if err := f.rep.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	before := f.keys()
	// A second catalog, made by init on a new host, pointed at the same place.
	g := newFixture(t)
	g.add(1)
	other := New(Config{Store: f.store, Cat: g.cat, Key: g.key, DataDir: g.dir})
	if err := other.Sync(g.ctx); !errors.Is(err, ErrForeign) {
		t.Fatalf("a second catalog's first sync: %v, want ErrForeign", err)
	}
	if after := f.keys(); !reflect.DeepEqual(before, after) {
		t.Fatal("the refused sync changed the target")
	}
	f.restoreMatches()
}

// TestLagUnderSteadyChanges: the lag is the age of the oldest change not
// replicated, not the time since the replica was last caught up.
func TestLagUnderSteadyChanges(t *testing.T) {
	f := newFixture(t)
	f.add(1)
	if err := f.rep.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		f.add(1)
		f.rep.measure(f.ctx)
		time.Sleep(30 * time.Millisecond)
		f.add(1) // a change after the sync's view: the replica is never caught up
		if err := f.rep.Sync(f.ctx); err != nil {
			t.Fatal(err)
		}
		f.add(1)
		f.rep.measure(f.ctx)
	}
	if lag := f.rep.Lag(); lag > 100*time.Millisecond {
		t.Fatalf("lag %s after steady changes, each replicated within 30 ms", lag)
	}
}

func TestObjectBoundToItsName(t *testing.T) {
	f := newFixture(t)
	f.add(3)
	if err := f.rep.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.add(1)
	if err := f.rep.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	var seg string
	for k := range f.keys() {
		if strings.Contains(k, "/seg-") {
			seg = k
		}
	}
	moved := strings.Replace(seg, "/seg-", "/seg-9", 1)[:len(seg)]
	rc, err := f.store.Get(f.ctx, seg)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := objstore.Put(f.ctx, f.store, moved, rc, true); err != nil {
		t.Fatal(err)
	}
	s := &sealer{key: f.key, catalog: f.cat.ID}
	if _, err := s.get(f.ctx, f.store, moved, nil); err == nil || !strings.Contains(err.Error(), "another name") {
		t.Fatalf("an object copied under another name opened: %v", err)
	}
}

package replica

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/catalog"
)

// chained is a fixture whose replica holds a generation and three
// segments after it; it returns the segments' keys, oldest first.
func chained(t *testing.T) (*fixture, []string) {
	f := newFixture(t)
	f.add(10)
	if err := f.rep.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	var segs []string
	for range 3 {
		f.add(2)
		if err := f.rep.Sync(f.ctx); err != nil {
			t.Fatal(err)
		}
		st, err := f.rep.loadState(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		segs = append(segs, st.Last)
	}
	return f, segs
}

func (f *fixture) restore(opts Options) (Restored, string, error) {
	f.t.Helper()
	path := filepath.Join(f.t.TempDir(), "restored.db")
	res, err := Restore(f.ctx, f.store, f.key, path, opts)
	return res, path, err
}

// adminActions reads the actions and targets of the catalog file's admin
// log.
func adminActions(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT action, coalesce(target, '') FROM admin_log ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var a, tg string
		if err := rows.Scan(&a, &tg); err != nil {
			t.Fatal(err)
		}
		out = append(out, a+" "+tg)
	}
	return strings.Join(out, "\n")
}

// TestRestoreRefusesLostSegment: a segment deleted from the middle of the
// chain, or the newest one (which only the head names), is refused,
// naming where the chain stops and what the head names; --accept-loss
// restores up to the gap and the admin log records the lost changes.
func TestRestoreRefusesLostSegment(t *testing.T) {
	for _, lost := range []int{1, 2} {
		name := map[int]string{1: "middle", 2: "newest"}[lost]
		t.Run(name, func(t *testing.T) {
			f, segs := chained(t)
			if err := f.store.Delete(f.ctx, segs[lost]); err != nil {
				t.Fatal(err)
			}
			_, _, err := f.restore(Options{})
			t.Logf("refused: %v", err)
			if !errors.Is(err, ErrLoss) || !strings.Contains(err.Error(), "lacks the segment that starts at change") || !strings.Contains(err.Error(), segs[2]) || !strings.Contains(err.Error(), "--accept-loss") {
				t.Fatalf("restore without %s: %v, want a refusal naming the gap and the head's %s", segs[lost], err, segs[2])
			}
			res, path, err := f.restore(Options{AcceptLoss: true})
			if err != nil {
				t.Fatal(err)
			}
			_, _, first, _, _ := parseKey(segs[lost])
			if res.Lost == nil || res.Lost.From != first || res.Lost.To != f.rep.Status().Replicated || res.Replicated != first-1 {
				t.Fatalf("restored %+v, lost %+v: want changes %d to %d lost", res, res.Lost, first, f.rep.Status().Replicated)
			}
			log := adminActions(t, path)
			if !strings.Contains(log, "catalog_restore_loss "+res.Lost.Range()) {
				t.Fatalf("the admin log does not record the loss:\n%s", log)
			}
		})
	}
}

// TestRestoreAtLeast: nothing inside an older copy tells it from the
// newest, so --at-least refuses a replica behind the change number given.
func TestRestoreAtLeast(t *testing.T) {
	f, _ := chained(t)
	n := f.rep.Status().Replicated
	if _, _, err := f.restore(Options{AtLeast: n}); err != nil {
		t.Fatalf("--at-least %d, the replica's own number: %v", n, err)
	}
	_, _, err := f.restore(Options{AtLeast: n + 5})
	t.Logf("refused: %v", err)
	if !errors.Is(err, ErrLoss) || !strings.Contains(err.Error(), "--at-least") {
		t.Fatalf("--at-least %d: %v, want a refusal", n+5, err)
	}
	dir := t.TempDir()
	res, err := Restore(f.ctx, f.store, f.key, filepath.Join(dir, catalog.FileName), Options{AtLeast: n + 5, AcceptLoss: true})
	if err != nil || res.Lost == nil || res.Lost.From != n+1 || res.Lost.To != n+5 {
		t.Fatalf("--accept-loss: %+v %v", res.Lost, err)
	}
	// The log's numbers go on after the highest number known, so that no
	// number names two changes: the first is the restore's own rows'.
	cat, err := catalog.Open(f.ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if first := firstChange(t, filepath.Join(dir, catalog.FileName)); first != n+6 {
		t.Fatalf("the restored catalog's first change is %d, want %d", first, n+6)
	}
}

// TestRestoreWithoutHead: a generation of the chained format without its
// head is refused; one written before the head existed (format 1) is
// restored with a warning.
func TestRestoreWithoutHead(t *testing.T) {
	f := newFixture(t)
	f.add(10)
	if err := f.rep.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.store.Delete(f.ctx, headKey); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.restore(Options{}); !errors.Is(err, ErrLoss) || !strings.Contains(err.Error(), "head") {
		t.Fatalf("restore without the head: %v, want a refusal", err)
	}
	// The same generation as an older server wrote it: format 1, no head.
	s := &sealer{key: f.key, catalog: f.cat.ID}
	rc, err := s.get(f.ctx, f.store, manifestKey(1), nil)
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.NewDecoder(rc).Decode(&m); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	m.Format = 1
	body, _ := json.Marshal(m)
	if err := f.store.Delete(f.ctx, manifestKey(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.put(f.ctx, f.store, manifestKey(1), func(w io.Writer) error { _, err := w.Write(body); return err }); err != nil {
		t.Fatal(err)
	}
	res, _, err := f.restore(Options{})
	if err != nil || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "--at-least") {
		t.Fatalf("restore of a format 1 generation: %+v %v, want it restored with a warning", res, err)
	}
	// Its first step after a restore writes a generation of the chained
	// format, saying why.
	var logged bytes.Buffer
	r := carryOn(t, f, &logged)
	if err := r.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logged.String(), "before segments named their predecessor") || r.Status().Generation != 2 {
		t.Fatalf("generation %d after the restore of a format 1 replica; log:\n%s", r.Status().Generation, logged.String())
	}
}

// TestRestoredCatalogCarriesOn: a catalog rebuilt by restore carries on
// the restored generation: its first step says so and writes no
// generation, its change numbers go on after the replica's, and its next
// segment follows the restored chain.
func TestRestoredCatalogCarriesOn(t *testing.T) {
	f, _ := chained(t)
	n := f.rep.Status().Replicated
	var logged bytes.Buffer
	r := carryOn(t, f, &logged)
	if err := r.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logged.String(), "replica: carrying on the restored generation") || strings.Contains(logged.String(), "whole generation") {
		t.Fatalf("the first step after a restore logged:\n%s", logged.String())
	}
	// Its first segment carries the restore's own rows (its records and
	// their leaves, its meta marks), noted after the replica's number.
	if st := r.Status(); st.Generation != 1 || st.Replicated <= n {
		t.Fatalf("after the restore's first step: %+v, want generation 1 past change %d", st, n)
	}
	if err := r.cfg.Cat.AdminLog(f.ctx, catalog.Record{Actor: "cli", Action: "after", Status: 200}); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	if st := r.Status(); st.Generation != 1 || st.Replicated <= n {
		t.Fatalf("after a change: %+v, want a segment of generation 1 past change %d", st, n)
	}
	res, path, err := f.restore(Options{AtLeast: n + 1})
	if err != nil || res.Generation != 1 || !strings.Contains(adminActions(t, path), "after") {
		t.Fatalf("a restore of the carried-on replica: %+v %v", res, err)
	}
	// A purge's rollover on a restored catalog cuts every shard: its log
	// does not hold the changes since the generation's base.
	if err := r.Forget(f.ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.restore(Options{AtLeast: n + 1}); err != nil {
		t.Fatal(err)
	}
}

// carryOn restores f's replica into a data directory of its own and
// opens a replica of that catalog on the same target, logging into w.
func carryOn(t *testing.T, f *fixture, w io.Writer) *Replica {
	t.Helper()
	dir := t.TempDir()
	if _, err := Restore(f.ctx, f.store, f.key, filepath.Join(dir, catalog.FileName), Options{}); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Open(f.ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	r := New(Config{Store: f.store, Cat: cat, Key: f.key, DataDir: dir, Log: slog.New(slog.NewTextHandler(w, nil))})
	if err := r.Enable(f.ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

// firstChange is the lowest change number the change log of the catalog
// file at path notes.
func firstChange(t *testing.T, path string) int64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var first int64
	if err := db.QueryRow(`SELECT coalesce(min(seq), 0) FROM replica_log`).Scan(&first); err != nil {
		t.Fatal(err)
	}
	return first
}

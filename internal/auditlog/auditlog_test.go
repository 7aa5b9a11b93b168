package auditlog_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/auditlog"
	"github.com/vcon-server/vcon-server/internal/translog"
	"github.com/vcon-server/vcon-server/seal"
)

const name = "vcon.example.com"

// closeCat closes the catalog of the last setup before its cleanup does.
var closeCat func()

func setup(t testing.TB, records int) (*catalog.Catalog, *auditlog.Logs, catalog.Tenant) {
	t.Helper()
	ctx := context.Background()
	mk, err := seal.MasterKeyFromBytes(bytes.Repeat([]byte{7}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cat, _, err := catalog.Create(ctx, dir, mk.CheckValue())
	if err != nil {
		t.Fatal(err)
	}
	var closed bool
	t.Cleanup(func() {
		if !closed {
			cat.Close()
		}
	})
	closeCat = func() { closed = true; cat.Close() }
	tn, err := cat.NewTenant(ctx, "acme", catalog.CLI)
	if err != nil {
		t.Fatal(err)
	}
	appendRecords(t, cat, tn, records)
	logs, err := auditlog.Open(ctx, cat, mk, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := logs.Sign(ctx); err != nil {
		t.Fatal(err)
	}
	return cat, logs, tn
}

func appendRecords(t testing.TB, cat *catalog.Catalog, tn catalog.Tenant, n int) {
	for i := 0; i < n; i += 500 {
		err := cat.Update(context.Background(), func(tx *catalog.Tx) error {
			for j := i; j < min(i+500, n); j++ {
				if err := tx.Audit(tn.ID, catalog.Record{Actor: "key:0123456789abcdef", Label: "ingest", Action: "store", Target: "019ad2c4-7a1e-7cc3-9a55-3d2f1e0b7c11", Status: 201}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func exec(t *testing.T, cat *catalog.Catalog, q string, args ...any) {
	t.Helper()
	if _, err := cat.DB().Exec(q, args...); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyFindsTampering changes a record's column, deletes a record
// from the middle and the newest, and cuts the log below a saved
// checkpoint: each is found and named.
func TestVerifyFindsTampering(t *testing.T) {
	ctx := context.Background()
	cat, logs, tn := setup(t, 40)
	log := catalog.LogID(tn.ID)
	saved, size, err := logs.Checkpoint(ctx, log)
	if err != nil || size != 40 {
		t.Fatalf("checkpoint over %d records: %v", size, err)
	}
	keep := []auditlog.Saved{{Name: "saved.txt", Note: saved}}
	if rep, err := auditlog.Verify(ctx, cat, name, log, keep); err != nil || rep.Records != 40 || rep.Signed != 40 || rep.Saved != 1 {
		t.Fatalf("a sound log: %+v %v", rep, err)
	}
	var ids []int64
	rows, _ := cat.DB().Query(`SELECT id FROM audit WHERE tenant = ? ORDER BY id`, tn.ID[:])
	for rows.Next() {
		var id int64
		rows.Scan(&id)
		ids = append(ids, id)
	}
	rows.Close()

	check := func(what, want string) {
		t.Helper()
		_, err := auditlog.Verify(ctx, cat, name, log, keep)
		if !errors.Is(err, auditlog.ErrTampered) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrTampered with %q", what, err, want)
		}
	}
	exec(t, cat, `UPDATE audit SET status = 200 WHERE id = ?`, ids[17])
	check("a status changed", "record 17 (row id")
	exec(t, cat, `UPDATE audit SET status = 201 WHERE id = ?`, ids[17])

	exec(t, cat, `DELETE FROM audit WHERE id = ?`, ids[39])
	check("the newest record deleted", "record 39 is missing")

	// The record and its leaf gone: the tree is short of the checkpoints.
	exec(t, cat, `DELETE FROM log_nodes WHERE id = (SELECT num << 40 FROM logs WHERE log = ?) + 39`, log)
	check("the newest record and its leaf deleted", "covers 40 records, the catalog holds 39")

	exec(t, cat, `DELETE FROM audit WHERE id = ?`, ids[5])
	check("a record from the middle deleted", "record 5 is row id")

	// Another log's checkpoint is refused as not this log's.
	other, _, _ := logs.Checkpoint(ctx, catalog.AdminLogID)
	if _, err := auditlog.Verify(ctx, cat, name, log, []auditlog.Saved{{Name: "admin.txt", Note: other}}); err == nil || !strings.Contains(err.Error(), "admin.txt") {
		t.Errorf("the admin log's checkpoint given for a tenant's: %v", err)
	}
}

// TestProofs: a checkpoint's root is the tree of its
// size, and a proof of each record verifies against it.
func TestProofs(t *testing.T) {
	ctx := context.Background()
	cat, logs, tn := setup(t, 300)
	log := catalog.LogID(tn.ID)
	note, size, err := logs.Checkpoint(ctx, log)
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := cat.SigningKeysFor(ctx, catalog.PurposeLog)
	cp, err := translog.Open(note, auditlog.Origin(name, log), ed25519.PublicKey(keys[0].Public))
	if err != nil || cp.Size != size {
		t.Fatalf("%v %d", err, cp.Size)
	}
	entries, err := cat.LogEntries(ctx, log, 0, int(size))
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(0); i < size; i += 13 {
		p, err := logs.Proof(ctx, log, i)
		if err != nil {
			t.Fatal(err)
		}
		var path []translog.Hash
		for _, l := range strings.Split(string(p), "\n")[2:] {
			if l == "" {
				break
			}
			h, _ := translog.ParseText([]byte("o\n1\n" + l + "\n"))
			path = append(path, h.Root)
		}
		if r, err := translog.RootFromInclusion(translog.LeafHash(entries[i]), i, size, path); err != nil || r != cp.Root {
			t.Fatalf("record %d: the proof gives %v, %v", i, r, err)
		}
	}
}

// TestBackfill: records of a catalog made before the trees become leaves
// at the first start, in id order, and verify.
func TestBackfill(t *testing.T) {
	ctx := context.Background()
	cat, _, tn := setup(t, 10)
	dir := strings.TrimSuffix(cat.Path(), "/catalog.db")
	exec(t, cat, `DELETE FROM log_nodes`)
	exec(t, cat, `DELETE FROM log_checkpoints`)
	exec(t, cat, `INSERT INTO meta(key, value) VALUES ('log_backfill', 1)`)
	closeCat()
	cat, err := catalog.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if n, err := cat.LogSize(ctx, catalog.LogID(tn.ID)); err != nil || n != 10+0 {
		t.Fatalf("the tenant's log after the backfill: %d records, %v", n, err)
	}
	if n, _ := cat.LogSize(ctx, catalog.AdminLogID); n != 1 {
		t.Fatalf("the admin log after the backfill: %d records, want the tenant_create", n)
	}
	if rep, err := auditlog.Verify(ctx, cat, name, catalog.LogID(tn.ID), nil); err != nil || rep.Records != 10 {
		t.Fatalf("%+v %v", rep, err)
	}
}

// BenchmarkVerify recomputes a log of 10,000 records from its rows and
// checks its checkpoint (under a second, issue 28):
//
//	go test -run '^$' -bench BenchmarkVerify ./internal/auditlog/
func BenchmarkVerify(b *testing.B) {
	ctx := context.Background()
	cat, _, tn := setup(b, 10000)
	b.ResetTimer()
	for range b.N {
		rep, err := auditlog.Verify(ctx, cat, name, catalog.LogID(tn.ID), nil)
		if err != nil || rep.Signed != 10000 {
			b.Fatalf("%+v %v", rep, err)
		}
	}
}

// BenchmarkSignPass is the signing loop's pass when no log grew, over
// 20 logs of 1,000 records: what serve spends each second at rest.
//
//	go test -run '^$' -bench SignPass ./internal/auditlog/
func BenchmarkSignPass(b *testing.B) {
	ctx := context.Background()
	cat, logs, _ := setup(b, 1000)
	for i := range 19 {
		tn, err := cat.NewTenant(ctx, "t"+strings.Repeat("x", i+1), catalog.CLI)
		if err != nil {
			b.Fatal(err)
		}
		appendRecords(b, cat, tn, 1000)
	}
	if _, err := logs.Sign(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if n, err := logs.Sign(ctx); err != nil || n != 0 {
			b.Fatalf("%d %v", n, err)
		}
	}
}

// TestPokeSignsAtOnce: with a tick an hour away, a poke (a purge, an
// erasure, a tenant change) has the new records signed.
func TestPokeSignsAtOnce(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	cat, logs, tn := setup(t, 3)
	go logs.Run(ctx, time.Hour, func(err error) { t.Error(err) })
	appendRecords(t, cat, tn, 2)
	logs.Poke()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if size, _, err := cat.LogCheckpoint(ctx, catalog.LogID(tn.ID)); err == nil && size == 5 {
			return
		}
	}
	t.Fatal("a poke did not sign the new records")
}

// TestVerifyEmptyCheckpoint: a checkpoint of no records (signed while the
// replica held none yet) is the empty tree's, which every log extends.
func TestVerifyEmptyCheckpoint(t *testing.T) {
	ctx := context.Background()
	cat, logs, tn := setup(t, 0)
	log := catalog.LogID(tn.ID)
	empty, size, err := logs.Checkpoint(ctx, log)
	if err != nil || size != 0 {
		t.Fatalf("checkpoint of no records: %d %v", size, err)
	}
	appendRecords(t, cat, tn, 3)
	if _, err := auditlog.Verify(ctx, cat, name, log, []auditlog.Saved{{Name: "empty.txt", Note: empty}}); err != nil {
		t.Fatalf("a log of 3 records against the empty checkpoint: %v", err)
	}
}

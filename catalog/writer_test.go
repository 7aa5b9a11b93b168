package catalog

import (
	"context"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/ids"
)

// A note is committed when Note returns (read back at once, by another
// handle too), shares batches with synced writes, and its log is synced
// within noteSync by the writer itself.
func TestNotesCommitThenSync(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c, _, err := Create(ctx, dir, masterKey(t, 1).CheckValue())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var tn Tenant
	if err := c.Update(ctx, func(tx *Tx) (err error) { tn, err = tx.CreateTenant("acme"); return err }); err != nil {
		t.Fatal(err)
	}
	other, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	done := make(chan error, 20)
	for i := 0; i < 10; i++ {
		go func() { done <- c.NoteAudit(ctx, tn.ID, Record{Actor: "key:x", Action: "read", Status: 200}) }()
		go func() { done <- c.Audit(ctx, tn.ID, Record{Actor: "key:x", Action: "delete", Status: 204}) }()
	}
	for i := 0; i < 20; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := countAudit(t, other, tn.ID); n != 20 {
		t.Fatalf("another handle reads %d records, want 20", n)
	}
	before := c.noteSyncs.Load()
	if err := c.NoteAudit(ctx, tn.ID, Record{Actor: "key:x", Action: "read", Status: 200}); err != nil {
		t.Fatal(err)
	}
	if n := countAudit(t, other, tn.ID); n != 21 {
		t.Fatalf("a note is not read back when Note returns: %d records", n)
	}
	// The connection a note ran on goes back to the pool synced FULL:
	// with one connection, the next reader gets that very one.
	c.LimitReaders(0)
	if err := c.NoteAudit(ctx, tn.ID, Record{Actor: "key:x", Action: "read", Status: 200}); err != nil {
		t.Fatal(err)
	}
	var mode int
	if err := c.DB().QueryRow(`PRAGMA synchronous`).Scan(&mode); err != nil || mode != 2 {
		t.Fatalf("a pool connection after a note: synchronous %d (%v), want 2 (FULL)", mode, err)
	}
	deadline := time.Now().Add(noteSync + 5*time.Second)
	for c.noteSyncs.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("the log holding a note was not synced")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func countAudit(t *testing.T, c *Catalog, tenant ids.ID) int {
	t.Helper()
	n := 0
	if err := c.AuditRecords(context.Background(), tenant, time.Time{}, time.Time{}, func(Record) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

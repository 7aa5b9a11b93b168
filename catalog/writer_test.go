package catalog

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
)

// A note is committed when Note returns (read back at once, by another
// handle too), shares batches with synced writes, and its log is synced
// within noteSync by the writer itself.
func TestNotesCommitThenSync(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c, tn := withTenant(t, dir)
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
	var mode, temp int
	if err := c.DB().QueryRow(`PRAGMA synchronous`).Scan(&mode); err != nil || mode != 2 {
		t.Fatalf("a pool connection after a note: synchronous %d (%v), want 2 (FULL)", mode, err)
	}
	if err := c.DB().QueryRow(`PRAGMA temp_store`).Scan(&temp); err != nil || temp != 0 {
		t.Fatalf("a pool connection after a note: temp_store %d (%v), want 0 (DEFAULT)", temp, err)
	}
	deadline := time.Now().Add(noteSync + 5*time.Second)
	for c.noteSyncs.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("the log holding a note was not synced")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// withTenant creates a catalog in dir with one tenant; it is closed when
// the test ends.
func withTenant(t testing.TB, dir string) (*Catalog, Tenant) {
	t.Helper()
	ctx := context.Background()
	c, _, err := Create(ctx, dir, masterKey(t, 1).CheckValue())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var tn Tenant
	if err := c.Update(ctx, func(tx *Tx) (err error) { tn, err = tx.CreateTenant("acme"); return err }); err != nil {
		t.Fatal(err)
	}
	return c, tn
}

func countAudit(t *testing.T, c *Catalog, tenant ids.ID) int {
	t.Helper()
	n := 0
	if err := c.AuditRecords(context.Background(), tenant, time.Time{}, time.Time{}, func(Record) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// Small writes share batches with one another and with general ones; a
// call that fails is rolled back alone, its journal in memory or not.
func TestSmallWritesRollBackAlone(t *testing.T) {
	ctx := context.Background()
	c, tn := withTenant(t, t.TempDir())
	failed := errors.New("refused after writing")
	const n = 200
	done := make(chan error, n)
	for i := 0; i < n; i++ {
		write := c.UpdateSmall
		if i%7 == 0 {
			write = c.Update
		}
		go func() {
			done <- write(ctx, func(tx *Tx) error {
				for j := 0; j < 40; j++ { // more pages than a journal keeps in memory by default
					if err := tx.Audit(tn.ID, Record{Actor: "key:x", Action: "store", Label: strings.Repeat("x", 200), Status: 201}); err != nil {
						return err
					}
				}
				if i%2 == 1 {
					return failed
				}
				return nil
			})
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-done; err != nil && !errors.Is(err, failed) {
			t.Fatal(err)
		}
	}
	if got := countAudit(t, c, tn.ID); got != n/2*40 {
		t.Fatalf("%d records, want %d: a failed call's rows were kept or a good call's lost", got, n/2*40)
	}
	if c.commits.Load() >= n {
		t.Logf("no batch held two calls (%d commits)", c.commits.Load())
	}
}

package catalog

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/vcon-server/vcon-server/internal/vocab"
)

// The prepared statements keep no rows: a key revoked and a tenant changed
// through another handle on the same file (as the command line does, from
// another process) apply at the next call of this one, with every
// statement already prepared on each of its connections.
func TestPreparedReadsSeeOtherWriters(t *testing.T) {
	ctx := context.Background()
	server, cli := twoHandles(t)
	var tn Tenant
	var key Key
	var token string
	err := cli.Update(ctx, func(tx *Tx) error {
		var err error
		if tn, err = tx.CreateTenant("acme"); err != nil {
			return err
		}
		key, token, err = tx.CreateKey(&tn.ID, []string{"read"}, nil, "reader")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// Calls at once, so the statements are prepared on several connections.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				if _, err := server.KeyByToken(ctx, token); err != nil {
					errs <- err
					return
				}
				if _, err := server.Tenant(ctx, tn.ID); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	err = cli.Update(ctx, func(tx *Tx) error {
		if _, err := tx.RevokeKey(key.ID); err != nil {
			return err
		}
		return tx.SetTenantMetadata(tn.ID, vocab.LevelCounts)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := server.KeyByToken(ctx, token); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a revoked key still opens: %v", err)
	}
	if got, err := server.Tenant(ctx, tn.ID); err != nil || got.Metadata != vocab.LevelCounts {
		t.Fatalf("the tenant's change is not seen: %v %v", got.Metadata, err)
	}
}

// Close leaves no connection open: a statement still being prepared for
// the next transaction holds one, and a connection that outlives Close
// would checkpoint its log into whatever file a restore then puts in the
// catalog's place (docs/check-and-recovery.md), or share its stale
// shared-memory index with the next open of that file.
func TestCloseLeavesNoConnection(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c, _, err := Create(ctx, dir, masterKey(t, 1).CheckValue())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	for i := 0; i < 20; i++ {
		c, err := Open(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		// A fresh handle prepares every statement of its first
		// transaction beside it, as a CLI command's audit record does.
		if err := c.AdminLog(ctx, Record{Actor: CLI.Name, Action: "catalog_backup", Status: 200}); err != nil {
			t.Fatal(err)
		}
		c.Close()
		if n := c.db.Stats().OpenConnections; n != 0 {
			t.Fatalf("round %d: %d connection(s) open after Close", i, n)
		}
	}
}

// twoHandles opens one new catalog twice, as a server and the command
// line beside it do, each closed at the test's end.
func twoHandles(t *testing.T) (server, cli *Catalog) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	server, _, err := Create(ctx, dir, masterKey(t, 1).CheckValue())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	cli, err = Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return server, cli
}

package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/vcon-server/vcon-server/internal/translog"
)

// Two handles on one file append to the same logs in turn, as the CLI
// does beside a serving server: each keeps its logs' heads, which the
// other's appends leave behind, so each batch after the other's appends
// collides and runs again (docs/FORMAT.md, "Audit log tree"). Every record
// ends as a leaf at its index, each call told the index its record got,
// and the trees are those of the rows.
func TestLogAppendsBesideAnotherProcess(t *testing.T) {
	ctx := context.Background()
	server, cli := twoHandles(t)
	tn, err := cli.NewTenant(ctx, "acme", CLI)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]uint64{} // target -> the index its call was told
	appendBy := func(c *Catalog, who string, round, n int) {
		var wg sync.WaitGroup
		for i := range n { // at once: batches of several calls
			wg.Go(func() {
				target := fmt.Sprintf("%s-%d-%d", who, round, i)
				err := c.Update(ctx, func(tx *Tx) error {
					if i%5 == 4 { // a call rolled back beside the others
						if err := tx.Audit(tn.ID, Record{Actor: who, Action: "read", Target: "never", Status: 200}); err != nil {
							return err
						}
						return errors.New("refused")
					}
					if err := tx.AdminLog(Record{Actor: who, Action: "key_create", Target: target, Status: 200}); err != nil {
						return err
					}
					if err := tx.Audit(tn.ID, Record{Actor: who, Action: "read", Target: target, Status: 200}); err != nil {
						return err
					}
					idx, _ := tx.AuditIndex()
					mu.Lock()
					got[target] = idx
					mu.Unlock()
					return nil
				})
				if i%5 != 4 && err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	for round := range 6 {
		appendBy(server, "server", round, 12)
		appendBy(cli, "cli", round, 1+round%3)
	}
	if t.Failed() {
		return
	}
	for _, log := range [][]byte{LogID(tn.ID), AdminLogID} {
		var edge translog.Edge
		var size uint64
		err := server.LogRows(ctx, log, func(r LogRow) error {
			if !r.HasStored || r.ID == 0 || r.StoredID != r.ID || r.Stored != translog.LeafHash(r.Leaf) {
				return fmt.Errorf("record %d (row %d): the tree holds row %d's leaf %v (%v), want %v", r.Index, r.ID, r.StoredID, r.Stored, r.HasStored, translog.LeafHash(r.Leaf))
			}
			if bytes.Contains(r.Leaf, []byte(`"never"`)) {
				return fmt.Errorf("record %d is of a call rolled back", r.Index)
			}
			edge.Append(nil, size, r.Stored)
			size++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n, err := server.LogSize(ctx, log); err != nil || n != size {
			t.Fatalf("log of %d rows has size %d (%v)", size, n, err)
		}
		root, err := translog.TreeHash(server.LogNodes(ctx, log), size)
		if err != nil || root != edge.Root() {
			t.Fatalf("the stored nodes give the root %v (%v), the rows %v", root, err, edge.Root())
		}
	}
	err = server.LogRows(ctx, LogID(tn.ID), func(r LogRow) error {
		for target, idx := range got {
			if bytes.Contains(r.Leaf, []byte(`"`+target+`"`)) && idx != r.Index {
				return fmt.Errorf("the call of %s was told index %d, its record is at %d", target, idx, r.Index)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A log the server knows empty (a call that appended to it was rolled
// back) and the CLI then numbers with its first record: the server's next
// append finds the number taken, collides at index 0, and runs again at
// the log's true end.
func TestLogNumberedBesideAnotherProcess(t *testing.T) {
	ctx := context.Background()
	server, cli := twoHandles(t)
	var tn Tenant
	if err := server.Update(ctx, func(tx *Tx) (err error) { tn, err = tx.CreateTenant("acme"); return err }); err != nil {
		t.Fatal(err)
	}
	if n, err := server.LogSize(ctx, LogID(tn.ID)); err != nil || n != 0 {
		t.Fatalf("a new tenant's log holds %d records (%v)", n, err)
	}
	err := server.Update(ctx, func(tx *Tx) error {
		if err := tx.Audit(tn.ID, Record{Actor: "server", Action: "read", Target: "never", Status: 200}); err != nil {
			return err
		}
		return errors.New("refused")
	})
	if err == nil {
		t.Fatal("the refused call committed")
	}
	for i, c := range []*Catalog{cli, server} {
		if err := c.Audit(ctx, tn.ID, Record{Actor: "cli", Action: "read", Target: fmt.Sprint(i), Status: 200}); err != nil {
			t.Fatal(err)
		}
	}
	if n := checkLeaves(t, server, LogID(tn.ID)); n != 2 {
		t.Errorf("the log holds %d records, want 2", n)
	}
}

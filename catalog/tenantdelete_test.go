package catalog

import (
	"context"
	"errors"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
)

// TestTenantDeleteRows: a tenant with a held vCon is refused and nothing
// changes; else its key row goes with its keys' use in one transaction
// that hides it from every lookup and from any new key; then its rows go,
// a page at a time (a page smaller than its rows here), while the other
// tenant's and the admin log's stay.
func TestTenantDeleteRows(t *testing.T) {
	ctx := context.Background()
	c, _, err := Create(ctx, t.TempDir(), []byte("check"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var tenants [2]Tenant
	for i, name := range []string{"acme", "globex"} {
		key := TenantKey{Tenant: ids.NewRandom(), Wrapped: []byte("wrapped"), Check: []byte("check")}
		if tenants[i], err = c.NewTenantKeyed(ctx, name, CLI, key); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.NewKey(ctx, &tenants[i].ID, []string{"read"}, "app", CLI); err != nil {
			t.Fatal(err)
		}
	}
	acme := tenants[0].ID
	held := ids.NewRandom()
	err = c.Update(ctx, func(tx *Tx) error {
		for _, tn := range tenants {
			for range 7 {
				v := Version{ID: ids.NewRandom(), Tenant: tn.ID, UUID: ids.NewRandom(), WrappedKey: []byte("k"), Location: InDir, Form: vocab.FormUnsigned}
				if _, err := tx.InsertVersion(v, CreateOnly); err != nil {
					return err
				}
				if err := tx.AddTokens(tn.ID, v.ID, [][16]byte{{1}, {2}}); err != nil {
					return err
				}
			}
		}
		return tx.SetHold(acme, held, true)
	})
	if err != nil {
		t.Fatal(err)
	}
	var he *HeldError
	if _, _, err := c.BeginTenantDelete(ctx, acme, CLI); !errors.As(err, &he) || he.Held != 1 {
		t.Fatalf("the delete of a tenant with a held vCon: %v", err)
	}
	if _, err := c.TenantKey(ctx, acme); err != nil {
		t.Fatalf("a refused delete changed the key: %v", err)
	}
	if err := c.Hold(ctx, acme, held, false, CLI); err != nil {
		t.Fatal(err)
	}

	d, row, err := c.BeginTenantDelete(ctx, acme, CLI)
	if err != nil {
		t.Fatal(err)
	}
	if d.Vcons != 7 || d.Versions != 7 || len(d.Digest) != 64 || string(row.Wrapped) != "wrapped" {
		t.Fatalf("the deletion %+v, its key row %+v", d, row)
	}
	if _, err := c.TenantKey(ctx, acme); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the key row after the delete began: %v", err)
	}
	if _, err := c.Tenant(ctx, acme); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a deleting tenant is found: %v", err)
	}
	if _, err := c.FindTenant(ctx, "acme"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a deleting tenant is found by name: %v", err)
	}
	if ts, _ := c.Tenants(ctx); len(ts) != 1 || ts[0].Name != "globex" {
		t.Fatalf("the tenants listed: %v", ts)
	}
	if _, err := c.AddTenantKey(ctx, TenantKey{Tenant: acme, Wrapped: []byte("new"), Check: []byte("c")}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a new key for a deleting tenant: %v", err)
	}
	if missing, _ := c.TenantsWithoutKey(ctx); len(missing) != 0 {
		t.Fatalf("a deleting tenant waits for a key: %v", missing)
	}
	keys, _ := c.Keys(ctx, &acme)
	for _, k := range keys {
		if k.RevokedAt == nil {
			t.Fatal("a deleting tenant's API key is not revoked")
		}
	}

	defer func(n int) { deletePage = n }(deletePage)
	deletePage = 3
	if err := c.DeleteTenantRows(ctx, d); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`SELECT count(*) FROM versions WHERE tenant = ?`, `SELECT count(*) FROM vcons WHERE tenant = ?`,
		`SELECT count(*) FROM search_tokens WHERE tenant = ?`, `SELECT count(*) FROM audit WHERE tenant = ?`,
		`SELECT count(*) FROM keys WHERE tenant = ?`, `SELECT count(*) FROM tenants WHERE id = ?`,
	} {
		var n int
		if err := c.db.QueryRow(q, acme[:]).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s: %d left (%v)", q, n, err)
		}
	}
	var other, logged int
	c.db.QueryRow(`SELECT count(*) FROM versions WHERE tenant = ?`, tenants[1].ID[:]).Scan(&other)
	c.db.QueryRow(`SELECT count(*) FROM admin_log WHERE tenant = ?`, acme.String()).Scan(&logged)
	if other != 7 || logged == 0 {
		t.Fatalf("the other tenant keeps %d versions, the admin log %d records of the deleted one", other, logged)
	}
	got, err := c.TenantDeletion(ctx, acme)
	if err != nil || got.RowsDoneAt == nil || got.DoneAt != nil {
		t.Fatalf("the deletion after its rows: %+v %v", got, err)
	}
}

// BenchmarkTenantDelete times the catalog's side of a tenant's delete
// (its first transaction, then every row a page at a time) for a tenant of
// 20,000 versions with 4 search tokens each, beside another tenant's.
func BenchmarkTenantDelete(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		c, _, err := Create(ctx, b.TempDir(), []byte("check"))
		if err != nil {
			b.Fatal(err)
		}
		var ts [2]Tenant
		for i, name := range []string{"acme", "globex"} {
			if ts[i], err = c.NewTenant(ctx, name, CLI); err != nil {
				b.Fatal(err)
			}
		}
		for page := 0; page < 20; page++ {
			err = c.Update(ctx, func(tx *Tx) error {
				for _, tn := range ts {
					for range 1000 {
						v := Version{ID: ids.NewRandom(), Tenant: tn.ID, UUID: ids.NewRandom(), WrappedKey: []byte("k"), Location: InDir, Form: vocab.FormUnsigned}
						if _, err := tx.InsertVersion(v, CreateOnly); err != nil {
							return err
						}
						if err := tx.AddTokens(tn.ID, v.ID, [][16]byte{{1}, {2}, {3}, {4}}); err != nil {
							return err
						}
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		d, _, err := c.BeginTenantDelete(ctx, ts[0].ID, CLI)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.DeleteTenantRows(ctx, d); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		c.Close()
		b.StartTimer()
	}
}

package catalog

import (
	"context"
	"errors"
	"testing"

	"github.com/vcon-server/vcon-server/ids"
)

// TestEraseBound: a party erasure that matches more vCons than its limit
// is refused before anything changes, having read no more than one past
// the limit; and the uuids of a vCon it takes whole refuse a later store.
func TestEraseBound(t *testing.T) {
	ctx := context.Background()
	c, _, err := Create(ctx, t.TempDir(), []byte("check"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tenant, err := c.NewTenant(ctx, "acme", CLI)
	if err != nil {
		t.Fatal(err)
	}
	token := [16]byte{1}
	var uuids []ids.ID
	err = c.Update(ctx, func(tx *Tx) error {
		if _, err := tx.exec(`UPDATE tenants SET search = 'parties', search_built = 1 WHERE id = ?`, tenant.ID[:]); err != nil {
			return err
		}
		for range 3 {
			v := Version{ID: ids.NewRandom(), Tenant: tenant.ID, UUID: ids.NewRandom(), WrappedKey: []byte("k"), Location: InDir, Form: FormUnsigned}
			if _, err := tx.InsertVersion(v, CreateOnly); err != nil {
				return err
			}
			if err := tx.AddTokens(tenant.ID, v.ID, [][16]byte{token}); err != nil {
				return err
			}
			uuids = append(uuids, v.UUID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	erase := func(limit int) (Erasure, error) {
		return eraseNow(t, c, EraseRequest{ID: ids.NewRandom(), Tenant: tenant.ID, Kind: "tel", Token: &token, Limit: limit})
	}
	var tooMany *TooManyError
	if _, err := erase(2); !errors.As(err, &tooMany) || tooMany.Matched != 3 {
		t.Fatalf("an erasure of 3 vCons with a limit of 2: %v", err)
	}
	var n int
	c.db.QueryRow(`SELECT count(*) FROM versions WHERE wrapped_key IS NOT NULL AND hidden_at IS NULL`).Scan(&n)
	if n != 3 {
		t.Fatalf("%d versions kept after a refused erasure, want 3", n)
	}
	c.db.QueryRow(`SELECT count(*) FROM erasures`).Scan(&n)
	if n != 0 {
		t.Fatalf("a refused erasure was recorded")
	}
	e, err := erase(3)
	if err != nil || e.Totals.Vcons != 3 {
		t.Fatalf("an erasure of 3 vCons with a limit of 3: %+v, %v", e, err)
	}
	err = c.Update(ctx, func(tx *Tx) error {
		_, err := tx.InsertVersion(Version{ID: ids.NewRandom(), Tenant: tenant.ID, UUID: uuids[0], Location: InDir}, Replace)
		return err
	})
	if !errors.Is(err, ErrErased) {
		t.Fatalf("a store of an erased uuid: %v, want ErrErased", err)
	}
}

// eraseNow runs an erasure's first transaction and its batches, and reads
// it back.
func eraseNow(t *testing.T, c *Catalog, r EraseRequest) (Erasure, error) {
	t.Helper()
	ctx := context.Background()
	if err := c.Update(ctx, func(tx *Tx) error {
		_, err := tx.BeginErasure(r)
		return err
	}); err != nil {
		return Erasure{}, err
	}
	if _, err := c.RunErasure(ctx, r.ID, nil); err != nil {
		return Erasure{}, err
	}
	return c.Erasure(ctx, r.Tenant, r.ID)
}

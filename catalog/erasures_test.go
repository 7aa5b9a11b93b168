package catalog

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
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
			v := Version{ID: ids.NewRandom(), Tenant: tenant.ID, UUID: ids.NewRandom(), WrappedKey: []byte("k"), Location: InDir, Form: vocab.FormUnsigned}
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

// livePages is the catalog's size in pages that hold data.
func livePages(t *testing.T, c *Catalog) int64 {
	t.Helper()
	var pages, free, size int64
	if err := c.db.QueryRow(`SELECT page_count, freelist_count, page_size FROM pragma_page_count, pragma_freelist_count, pragma_page_size`).Scan(&pages, &free, &size); err != nil {
		t.Fatal(err)
	}
	return (pages - free) * size
}

// TestEraseNeverStored: an erasure of 10,000 uuids the tenant never stored
// records none of them (they are counted, and a later store of one is not
// refused), leaves the catalog's live pages within 100 KB of where they
// were, and takes them in batches; one stored uuid among them, in the last
// batch, is taken whole all the same, even when the erasure was cut after
// its first batch and taken up again.
func TestEraseNeverStored(t *testing.T) {
	ctx := context.Background()
	c, tenant := withTenant(t, t.TempDir())
	uuids := make([]ids.ID, 10000)
	for i := range uuids {
		uuids[i] = ids.NewRandom()
	}
	stored := uuids[0]
	for _, u := range uuids {
		if string(u[:]) > string(stored[:]) {
			stored = u
		}
	}
	if err := c.Update(ctx, func(tx *Tx) error {
		_, err := tx.InsertVersion(Version{ID: ids.NewRandom(), Tenant: tenant.ID, UUID: stored, WrappedKey: []byte("k"), Location: InDir, Form: vocab.FormUnsigned}, CreateOnly)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Warm the catalog's pages for erasures, as a first one would.
	if _, err := eraseNow(t, c, EraseRequest{ID: ids.NewRandom(), Tenant: tenant.ID, Kind: "uuids", UUIDs: []ids.ID{ids.NewRandom()}, Limit: 10000}); err != nil {
		t.Fatal(err)
	}
	before := livePages(t, c)

	r := EraseRequest{ID: ids.NewRandom(), Tenant: tenant.ID, Kind: "uuids", UUIDs: uuids, Limit: 10000}
	if err := c.Update(ctx, func(tx *Tx) error {
		_, err := tx.BeginErasure(r)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var more bool
	if err := c.Update(ctx, func(tx *Tx) error {
		var err error
		more, _, err = tx.EraseBatch(r.ID)
		return err
	}); err != nil || !more {
		t.Fatalf("the first batch of 10,000 uuids: more %v, %v", more, err)
	}
	// Cut here: the erasure is running, and the next run takes the rest.
	running, err := c.RunningErasures(ctx)
	if err != nil || !slices.Contains(running, r.ID) {
		t.Fatalf("running erasures after one batch: %v, %v", running, err)
	}
	batches := 1
	if _, err := c.RunErasure(ctx, r.ID, func() { batches++ }); err != nil {
		t.Fatal(err)
	}
	if want := 10000/EraseBatch - 1; batches != want {
		t.Fatalf("%d batches after the first, want %d", batches, want)
	}
	e, err := c.Erasure(ctx, tenant.ID, r.ID)
	if err != nil || e.NotFound != 9999 || e.Totals != (ErasedTotals{Vcons: 1, Versions: 1}) || e.Running {
		t.Fatalf("the erasure reads %+v, %v; want 9,999 not found and the stored one taken", e, err)
	}
	grown := livePages(t, c) - before
	t.Logf("live pages grew by %d bytes for 10,000 never-stored uuids", grown)
	if grown >= 100<<10 {
		t.Fatalf("the catalog's live pages grew by %d bytes for 10,000 never-stored uuids, want less than 100 KB", grown)
	}
	if err := c.Update(ctx, func(tx *Tx) error {
		_, err := tx.InsertVersion(Version{ID: ids.NewRandom(), Tenant: tenant.ID, UUID: uuids[1], Location: InDir}, CreateOnly)
		return err
	}); err != nil {
		t.Fatalf("a store of a uuid an erasure found nothing of: %v", err)
	}
	if err := c.Update(ctx, func(tx *Tx) error {
		_, err := tx.InsertVersion(Version{ID: ids.NewRandom(), Tenant: tenant.ID, UUID: stored, Location: InDir}, Replace)
		return err
	}); !errors.Is(err, ErrErased) {
		t.Fatalf("a store of the uuid the erasure took: %v, want ErrErased", err)
	}
}

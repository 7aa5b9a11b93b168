package archive_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/receipt"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/archivetest"
)

func storeOne(t *testing.T, a *archive.Archive, tenant ids.ID) ids.ID {
	t.Helper()
	u := ids.NewRandom()
	body := apitest.NewVcon(u.String(), "erase", "+15555550177")
	if _, err := a.Store(context.Background(), archive.StoreRequest{Tenant: tenant, Body: bytes.NewReader(body), ContentType: "application/vcon"}); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestErasurePendingThenSwept: an erasure whose object deletes fail
// reports itself pending, with the reason, its vCons unreadable at once;
// the sweep finishes it, with its receipt, once the storage works again.
func TestErasurePendingThenSwept(t *testing.T) {
	ctx := context.Background()
	a, fd, tenant := newArchive(t)
	if _, err := archive.EnsureSigningKey(ctx, a.Cat, a.Key); err != nil {
		t.Fatal(err)
	}
	u := storeOne(t, a, tenant)
	fd.broken.Store(true)
	_, err := a.Erase(ctx, archive.EraseRequest{Tenant: tenant, Kind: "uuids", UUIDs: []ids.ID{u}, Actor: "key:test"})
	var pending *archive.ErasePending
	if !errors.As(err, &pending) {
		t.Fatalf("an erasure whose deletes fail: %v, want *ErasePending", err)
	}
	if _, _, err := a.Open(ctx, tenant, u); !errors.Is(err, archive.ErrNotFound) {
		t.Fatalf("the erased vCon opens while its purge waits: %v", err)
	}
	e, err := a.Cat.Erasure(ctx, tenant, pending.ID)
	if err != nil || e.DoneAt != nil || e.Error == "" || e.Receipt != "" {
		t.Fatalf("the pending erasure reads %+v, %v", e, err)
	}
	fd.broken.Store(false)
	if _, err := a.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	e, err = a.Cat.Erasure(ctx, tenant, pending.ID)
	if err != nil || e.DoneAt == nil || e.Error != "" {
		t.Fatalf("after the sweep the erasure reads %+v, %v", e, err)
	}
	set, _ := a.JWKS(ctx)
	if p, _, err := receipt.Verify(e.Receipt, set); err != nil || len(p.Erased) != 1 || p.Erased[0].UUID != u.String() {
		t.Fatalf("the receipt: %+v, %v", p, err)
	}
}

// TestErasureAfterRotation: a master-key rotation re-wraps the receipts'
// signing key with the data keys, so the same key signs after it.
func TestErasureAfterRotation(t *testing.T) {
	ctx := context.Background()
	a, _, tenant := newArchive(t)
	if _, err := archive.EnsureSigningKey(ctx, a.Cat, a.Key); err != nil {
		t.Fatal(err)
	}
	before, _ := a.JWKS(ctx)
	u := storeOne(t, a, tenant)
	newKey := archivetest.MasterKey(t, 9)
	if _, err := archive.RotateMasterKey(ctx, a.Cat, a.Key, newKey, "new.key", nil); err != nil {
		t.Fatal(err)
	}
	a.Key = newKey
	if made, err := archive.EnsureSigningKey(ctx, a.Cat, a.Key); err != nil || made {
		t.Fatalf("a rotated catalog's signing key made again: %v, %v", made, err)
	}
	e, err := a.Erase(ctx, archive.EraseRequest{Tenant: tenant, Kind: "uuids", UUIDs: []ids.ID{u}})
	if err != nil {
		t.Fatal(err)
	}
	if _, kid, err := receipt.Verify(e.Receipt, before); err != nil || kid != before.Keys[0].Kid {
		t.Fatalf("the receipt after a rotation does not verify with the key before it: %v", err)
	}
	if _, err := a.Cat.Erasure(ctx, tenant, e.ID); err != nil {
		t.Fatal(err)
	}
	// A store of the erased uuid is refused, in the catalog itself.
	err = a.Cat.Update(ctx, func(tx *catalog.Tx) error {
		_, err := tx.InsertVersion(catalog.Version{ID: ids.NewRandom(), Tenant: tenant, UUID: u, Location: catalog.InDir}, catalog.Replace)
		return err
	})
	if !errors.Is(err, catalog.ErrErased) {
		t.Fatalf("a store of an erased uuid: %v, want ErrErased", err)
	}
}

package archive_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/seal"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
)

// failingDeletes is a store whose deletes fail while broken is set.
type failingDeletes struct {
	objstore.Store
	broken atomic.Bool
}

func (f *failingDeletes) Delete(ctx context.Context, key string) error {
	if f.broken.Load() {
		return errors.New("injected: the storage refused the delete")
	}
	return f.Store.Delete(ctx, key)
}

func newArchive(t *testing.T) (*archive.Archive, *failingDeletes, ids.ID) {
	ctx := context.Background()
	dir := t.TempDir()
	mk, err := seal.MasterKeyFromBytes(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	cat, _, err := catalog.Create(ctx, dir, mk.CheckValue())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	d, err := objstore.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fd := &failingDeletes{Store: d}
	tenant, err := cat.NewTenant(ctx, "acme", catalog.CLI)
	if err != nil {
		t.Fatal(err)
	}
	return &archive.Archive{Config: archive.Config{Cat: cat, Objects: fd, Loc: catalog.InDir, Key: mk, MaxSize: 1 << 20, DefaultRetention: 0, Now: time.Now}}, fd, tenant.ID
}

// TestZeroRetentionPurgeFailure: a 0d DELETE whose object delete fails
// reports ErrPurgeIncomplete (a 5xx), the vCon is unreadable at once, and
// the sweep finishes the purge once the storage works again.
func TestZeroRetentionPurgeFailure(t *testing.T) {
	ctx := context.Background()
	a, fd, tenant := newArchive(t)
	uuid := ids.NewRandom()
	body := apitest.NewVcon(uuid.String(), "x", "+15555550100")
	if _, err := a.Store(ctx, archive.StoreRequest{Tenant: tenant, Mode: catalog.CreateOnly, Body: bytes.NewReader(body), ContentType: "application/vcon"}); err != nil {
		t.Fatal(err)
	}
	fd.broken.Store(true)
	if err := a.Delete(ctx, tenant, uuid); !errors.Is(err, archive.ErrPurgeIncomplete) {
		t.Fatalf("Delete: %v, want ErrPurgeIncomplete", err)
	}
	if _, _, err := a.Open(ctx, tenant, uuid); !errors.Is(err, archive.ErrNotFound) {
		t.Fatalf("Open after a failed purge: %v", err)
	}
	purging, _ := a.Cat.Purging(ctx)
	if len(purging) != 1 || purging[0].WrappedKey != nil {
		t.Fatalf("purging: %+v", purging)
	}
	if n, err := a.Sweep(ctx); err == nil || n != 0 {
		t.Fatalf("sweep with broken storage: %d, %v", n, err)
	}
	fd.broken.Store(false)
	if n, err := a.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	if purging, _ := a.Cat.Purging(ctx); len(purging) != 0 {
		t.Fatalf("still purging: %+v", purging)
	}
	var left int
	objstore.Store(fd).List(ctx, "objects/", func(objstore.Info) error { left++; return nil })
	if left != 0 {
		t.Fatalf("%d objects left", left)
	}
}

// TestSealedCopyUnreadableAfterPurge: bytes copied aside before a purge
// cannot be opened after it, since their key is gone.
func TestSealedCopyUnreadableAfterPurge(t *testing.T) {
	ctx := context.Background()
	a, _, tenant := newArchive(t)
	uuid := ids.NewRandom()
	body := apitest.NewVcon(uuid.String(), "x", "+15555550100")
	if _, err := a.Store(ctx, archive.StoreRequest{Tenant: tenant, Mode: catalog.CreateOnly, Body: bytes.NewReader(body), ContentType: "application/vcon"}); err != nil {
		t.Fatal(err)
	}
	v, err := a.Cat.Current(ctx, tenant, uuid)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := a.Sealed(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	copyAside, _ := io.ReadAll(rc)
	rc.Close()
	if err := a.Delete(ctx, tenant, uuid); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Cat.Version(ctx, v.ID); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("the version row outlived its purge: %v", err)
	}
	// Nothing in the catalog can open the copy: the only key was v's, now
	// gone; a guessed key fails authentication.
	var guess seal.DataKey
	r, err := seal.NewReader(bytes.NewReader(copyAside), guess, tenant, v.ID)
	if err == nil {
		_, err = io.ReadAll(r)
	}
	if !errors.Is(err, seal.ErrDamaged) {
		t.Fatalf("opening the copy: %v", err)
	}
}

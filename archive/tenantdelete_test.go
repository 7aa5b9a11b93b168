package archive_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/kms"
	"github.com/vcon-server/vcon-server/internal/receipt"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/archivetest"
)

// tenantWithVcons is a kit whose tenant acme holds n vCons, with the
// receipts' signing key.
func tenantWithVcons(t *testing.T, n int) (*archive.Archive, *failingDeletes, ids.ID) {
	t.Helper()
	ctx := context.Background()
	k := archivetest.New(t)
	if _, err := archive.EnsureSigningKey(ctx, k.Cat, k.Key); err != nil {
		t.Fatal(err)
	}
	d, err := objstore.NewDir(k.Dir)
	if err != nil {
		t.Fatal(err)
	}
	fd := &failingDeletes{Store: d}
	a := k.Archive(t, archive.Config{Objects: fd, Loc: catalog.InDir, DefaultRetention: time.Hour, Now: time.Now, DataDir: k.Dir})
	for range n {
		u := ids.NewRandom()
		if _, err := a.Store(ctx, archive.StoreRequest{Tenant: k.Tenant, Mode: catalog.CreateOnly, Body: bytes.NewReader(apitest.NewVcon(u.String(), "x", "+15555550100")), ContentType: "application/vcon"}); err != nil {
			t.Fatal(err)
		}
	}
	return a, fd, k.Tenant
}

// TestTenantDeleteWaitsForStorage: a delete whose object deletes fail has
// destroyed the key already (nothing of the tenant opens, it is unknown);
// the sweep finishes it once the storage works, with a receipt that
// verifies against the catalog's keys.
func TestTenantDeleteWaitsForStorage(t *testing.T) {
	ctx := context.Background()
	a, fd, tenant := tenantWithVcons(t, 2)
	fd.broken.Store(true)
	var pending *archive.TenantDeletePending
	if _, err := a.DeleteTenant(ctx, tenant, catalog.CLI); !errors.As(err, &pending) {
		t.Fatalf("a delete whose storage fails: %v", err)
	}
	if _, err := a.Cat.Tenant(ctx, tenant); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("the tenant after its key went: %v", err)
	}
	if _, err := a.TenantKey(ctx, tenant); err == nil {
		t.Fatal("the deleting tenant's key opens (or was made again)")
	}
	if _, err := a.Sweep(ctx); err == nil {
		t.Fatal("the sweep with broken storage finished the delete")
	}
	fd.broken.Store(false)
	if _, err := a.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := a.Cat.TenantDeletion(ctx, tenant)
	if err != nil || d.DoneAt == nil {
		t.Fatalf("the deletion after the sweep: %+v %v", d, err)
	}
	set, err := a.JWKS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := receipt.Verify(d.Receipt, set)
	if err != nil || p.Filter != archive.TenantDeleteFilter || p.Tenant != tenant.String() || p.Digest == nil || p.Digest.Erased != 2 || p.Digest.Versions != 2 {
		t.Fatalf("the receipt: %+v %v", p, err)
	}
	left := 0
	objstore.Store(fd).List(ctx, "", func(i objstore.Info) error {
		if strings.Contains(i.Key, tenant.String()) {
			left++
		}
		return nil
	})
	if left != 0 {
		t.Fatalf("%d objects of the tenant left", left)
	}
}

// TestTenantDeleteKMSHook: a tenant key wrapped by a KMS key of the
// tenant's own has that key's deletion scheduled on its key service,
// once; without one the delete waits, its tenant's key destroyed all the
// same.
func TestTenantDeleteKMSHook(t *testing.T) {
	ctx := context.Background()
	a, _, tenant := tenantWithVcons(t, 1)
	if _, err := a.Cat.DB().Exec(`UPDATE tenant_keys SET kms_key = 'tenant-key-1' WHERE tenant = ?`, tenant[:]); err != nil {
		t.Fatal(err)
	}
	var pending *archive.TenantDeletePending
	if _, err := a.DeleteTenant(ctx, tenant, catalog.CLI); !errors.As(err, &pending) || !strings.Contains(err.Error(), "no [kms]") {
		t.Fatalf("a delete without the KMS hook: %v", err)
	}
	admin := &deletions{}
	a.KeyServices = admin
	scheduled := &admin.keys
	d, err := a.FinishTenantDelete(ctx, tenant)
	if err != nil || d.DoneAt == nil || d.KMSKey != "" {
		t.Fatalf("the delete with the hook: %+v %v", d, err)
	}
	if _, err := a.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if len(*scheduled) != 1 || (*scheduled)[0] != "tenant-key-1" {
		t.Fatalf("the KMS keys scheduled for deletion: %v", *scheduled)
	}
}

// deletions is a key service that records the keys it is asked to
// delete, and makes and wraps none.
type deletions struct{ keys []string }

func (d *deletions) ServiceOf(string) string { return "" }

func (d *deletions) Key(string, string) (kms.Wrapper, error) {
	return nil, errors.New("no key is used here")
}

func (d *deletions) Admin(string) (kms.KeyAdmin, error) { return d, nil }

func (d *deletions) NewKey(context.Context, string) (string, error) {
	return "", errors.New("no key is made here")
}

func (d *deletions) DeleteKey(_ context.Context, key string) error {
	d.keys = append(d.keys, key)
	return nil
}

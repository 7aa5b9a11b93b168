package archive

import (
	"context"
	"fmt"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/seal"
)

// RotateMasterKey moves cat from oldKey to newKey (docs/FORMAT.md,
// "Master-key rotation"): the data keys still under the master key move to
// their tenants' keys first (MoveToTenantKeys), then one transaction
// re-wraps every tenant key, the receipts' signing keys and the webhook
// secrets under newKey and records its check value. Nothing changes
// unless that transaction commits, so a rotation cut off anywhere leaves
// the old key working. newFile, the new key's file, is recorded for a
// server that runs on (it takes the key from there). moved, when not nil,
// is told each data key the move re-wrapped (a progress line). It returns
// how many tenant keys it re-wrapped.
func RotateMasterKey(ctx context.Context, cat *catalog.Catalog, oldKey, newKey *seal.MasterKey, newFile string, moved func(keys int)) (int, error) {
	if _, err := MoveToTenantKeys(ctx, cat, oldKey, moved); err != nil {
		return 0, err
	}
	rewrapTenant := func(tenant, _ ids.ID, wrapped []byte) ([]byte, error) {
		raw, err := oldKey.UnwrapTenantKey(tenant, wrapped)
		if err != nil {
			return nil, fmt.Errorf("the key of tenant %s does not open with the current master key, so nothing was rotated; vcon-server check names the damaged keys", tenant)
		}
		defer clear(raw)
		return newKey.WrapTenantKey(tenant, raw)
	}
	rewrapSigning := func(catalogID, key ids.ID, wrapped []byte) ([]byte, error) {
		dk, err := oldKey.Unwrap(wrapped, catalogID, key)
		if err != nil {
			return nil, fmt.Errorf("the receipts' signing key %s does not open with the current master key, so nothing was rotated", key)
		}
		return newKey.Wrap(dk, catalogID, key)
	}
	// Webhook secrets are sealed under the master key: sealed under the
	// new one in the same transaction, so no cut leaves one that neither
	// key opens (docs/FORMAT.md, "Master-key rotation").
	reseal := func(tenant ids.ID, sealed []byte) ([]byte, error) {
		secret, err := oldKey.OpenSecret(tenant, sealed)
		if err != nil {
			return nil, fmt.Errorf("the webhook secret of tenant %s does not open with the current master key, so nothing was rotated; set the tenant's webhook again (vcon-server tenant set-webhook), or turn it off, then rotate", tenant)
		}
		return newKey.SealSecret(tenant, secret)
	}
	n, err := cat.RotateKeys(ctx, catalog.Rotation{
		Check: newKey.CheckValue(), KeyFile: newFile, TenantKey: rewrapTenant, SigningKey: rewrapSigning, Secret: reseal,
		BeforeCommit: func() { crashpoint.Hit(crashpoint.RotateBeforeCommit) },
	})
	if err != nil {
		return 0, err
	}
	// The keys wrapped under the old master key stay in the WAL until a
	// checkpoint copies the new ones over them; secure_delete zeroes what
	// is freed.
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := cat.Checkpoint(cctx); err != nil {
		return n, fmt.Errorf("the rotation is committed, but checkpointing the catalog failed (the next start does it): %w", err)
	}
	return n, nil
}

// MoveToTenantKeys gives every tenant of cat its key and moves every data
// key still under the master key mk (a catalog made before tenant keys)
// under its tenant's key, a page per transaction with its cursor
// (docs/FORMAT.md, "Keys"): a move cut anywhere resumes where it stopped,
// and every version reads throughout, since a wrapped key's first byte
// says which key wraps it. moved, when not nil, is told each page's count.
// It returns how many data keys it moved; 0 once the move is done.
func MoveToTenantKeys(ctx context.Context, cat *catalog.Catalog, mk *seal.MasterKey, moved func(keys int)) (int, error) {
	if done, err := cat.KeysMoved(ctx); err != nil || done {
		return 0, err
	}
	without, err := cat.TenantsWithoutKey(ctx)
	if err != nil {
		return 0, err
	}
	for _, t := range without {
		if _, err := makeTenantKey(ctx, cat, mk, t); err != nil {
			return 0, err
		}
	}
	crashpoint.Hit(crashpoint.KeyMoveAfterKeys)
	keys := map[ids.ID]*seal.TenantKey{}
	rewrap := func(tenant, version ids.ID, wrapped []byte) ([]byte, error) {
		dk, err := mk.Unwrap(wrapped, tenant, version)
		if err != nil {
			return nil, fmt.Errorf("the data key of version %s (tenant %s) does not open with the master key, so the move to tenant keys stopped before it; vcon-server check --deep names the damaged versions", version, tenant)
		}
		tk := keys[tenant]
		if tk == nil {
			return nil, fmt.Errorf("version %s belongs to tenant %s, which the catalog does not have; vcon-server check names such versions", version, tenant)
		}
		return tk.Wrap(dk, version)
	}
	total := 0
	for {
		// Every tenant's key is open before a page's transaction starts,
		// since the page rewraps inside it (CPU only).
		if err := openAllTenantKeys(ctx, cat, mk, keys); err != nil {
			return total, err
		}
		n, done, err := cat.MoveKeysPage(ctx, rewrap)
		if err != nil {
			return total, err
		}
		total += n
		if moved != nil && n > 0 {
			moved(n)
		}
		if done {
			return total, nil
		}
		crashpoint.Hit(crashpoint.KeyMoveAfterPage)
	}
}

// openAllTenantKeys adds to keys every tenant's key not in it yet.
func openAllTenantKeys(ctx context.Context, cat *catalog.Catalog, mk *seal.MasterKey, keys map[ids.ID]*seal.TenantKey) error {
	tenants, err := cat.Tenants(ctx)
	if err != nil {
		return err
	}
	for _, t := range tenants {
		if keys[t.ID] != nil {
			continue
		}
		k, err := openTenantKey(ctx, cat, mk, t.ID)
		if err != nil {
			return err
		}
		keys[t.ID] = k
	}
	return nil
}

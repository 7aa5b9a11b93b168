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

// RotateMasterKey re-wraps every data key of cat, and seals every webhook
// secret again, from oldKey to newKey in one transaction (docs/FORMAT.md,
// "Master-key rotation"). The server is stopped: one running on the old
// key would wrap new data keys that the new key cannot open. Nothing changes unless the transaction commits, so
// a rotation cut off anywhere leaves the old key working. rewrapped, when
// not nil, is told each key re-wrapped (1), for a progress line; it runs
// inside the transaction, so it must be quick.
func RotateMasterKey(ctx context.Context, cat *catalog.Catalog, oldKey, newKey *seal.MasterKey, rewrapped func(keys int)) (int, error) {
	rewrap := func(tenant, version ids.ID, wrapped []byte) ([]byte, error) {
		dk, err := oldKey.Unwrap(wrapped, tenant, version)
		if err != nil {
			return nil, fmt.Errorf("the data key of version %s (tenant %s) does not open with the current master key, so nothing was rotated; vcon-server check --deep names the damaged versions", version, tenant)
		}
		if rewrapped != nil {
			rewrapped(1)
		}
		return newKey.Wrap(dk, tenant, version)
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
	n, err := cat.RotateKeys(ctx, newKey.CheckValue(), rewrap, reseal, func() { crashpoint.Hit(crashpoint.RotateBeforeCommit) })
	if err != nil {
		return 0, err
	}
	// Search indexes are keyed by the master key: those made under the old
	// one are dropped now (serve would at its next start) so that nothing
	// keyed by the old key stays in the catalog; serve builds them again.
	if _, err := cat.ResetSearchKeys(ctx, newKey.CheckValue()); err != nil {
		return n, fmt.Errorf("the rotation is committed, but dropping the search indexes made under the old key failed (the next start does it): %w", err)
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

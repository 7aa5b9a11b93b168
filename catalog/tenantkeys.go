package catalog

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/vcon-server/vcon-server/internal/ids"
)

// TenantKey is a tenant's row of tenant_keys: its key wrapped under the
// master key (KMSKey empty) or under a KMS key of its own, and the key's
// check value (docs/FORMAT.md, "Keys").
type TenantKey struct {
	Tenant  ids.ID
	Wrapped []byte
	Check   []byte
	KMSKey  string
	// KMSService names the [kms.tenant.NAME] table that reaches KMSKey;
	// empty for [kms]'s own service.
	KMSService string
	// MasterCheck, for a key just wrapped under the master key, is that
	// key's check value: the write is refused with ErrKeyRotated unless
	// the catalog still names it. Not stored.
	MasterCheck []byte
}

// TenantKey reads tenant's key row; ErrNotFound when it has none yet.
func (c *Catalog) TenantKey(ctx context.Context, tenant ids.ID) (TenantKey, error) {
	k := TenantKey{Tenant: tenant}
	var kms, service sql.NullString
	err := c.db.QueryRowContext(ctx, `SELECT wrapped, key_check, kms_key, kms_service FROM tenant_keys WHERE tenant = ?`, tenant[:]).
		Scan(&k.Wrapped, &k.Check, &kms, &service)
	if errors.Is(err, sql.ErrNoRows) {
		return TenantKey{}, ErrNotFound
	}
	if err != nil {
		return TenantKey{}, fmt.Errorf("catalog: read tenant key: %w", err)
	}
	k.KMSKey, k.KMSService = kms.String, service.String
	return k, nil
}

// AddTenantKey records k as its tenant's key, unless the tenant has one
// already, and returns the row that holds: two processes making a key at
// once agree on the first. A tenant whose search index was built under
// another key (the master key's, before tenant keys) has it dropped in the
// same transaction, so that it is built again under this one.
func (c *Catalog) AddTenantKey(ctx context.Context, k TenantKey) (TenantKey, error) {
	if err := c.Update(ctx, func(tx *Tx) error { return tx.addTenantKey(k) }); err != nil {
		return TenantKey{}, err
	}
	return c.TenantKey(ctx, k.Tenant)
}

func (tx *Tx) addTenantKey(k TenantKey) error {
	if err := tx.requireKeyCheck(k.MasterCheck); err != nil {
		return err
	}
	res, err := tx.exec(`INSERT INTO tenant_keys(tenant, wrapped, key_check, kms_key, kms_service, made_at) SELECT ?, ?, ?, ?, ?, ?
		WHERE NOT EXISTS (SELECT 1 FROM tenant_deletions WHERE tenant = ?)
		ON CONFLICT(tenant) DO NOTHING`, k.Tenant[:], k.Wrapped, k.Check, nullString(k.KMSKey), nullString(k.KMSService), nanos(tx.now), k.Tenant[:])
	if err != nil {
		return fmt.Errorf("catalog: add tenant key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil
	}
	return tx.resetSearchIfNot(k.Tenant, k.Check)
}

// resetSearchIfNot drops tenant's search index, tokens and progress, when
// it was built (or begun) under a key whose check value is not check.
func (tx *Tx) resetSearchIfNot(tenant ids.ID, check []byte) error {
	var built int
	var cursor, was []byte
	err := tx.queryRow(`SELECT search_built, search_cursor, search_key_check FROM tenants WHERE id = ?`, tenant[:]).Scan(&built, &cursor, &was)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil || (built == 0 && cursor == nil) || bytes.Equal(was, check) {
		return err
	}
	if _, err := tx.exec(`DELETE FROM search_tokens WHERE tenant = ?`, tenant[:]); err != nil {
		return err
	}
	_, err = tx.exec(`UPDATE tenants SET search_cursor = NULL, search_built = 0, search_key_check = NULL WHERE id = ?`, tenant[:])
	return err
}

// TenantsWithoutKey lists the tenants that have no key yet: those of a
// catalog made before tenant keys, until the move makes theirs.
func (c *Catalog) TenantsWithoutKey(ctx context.Context) ([]ids.ID, error) {
	return queryAll(ctx, c.db, "tenants without a key", scanID,
		`SELECT id FROM tenants WHERE id NOT IN (SELECT tenant FROM tenant_keys)`+notDeleting+` ORDER BY id`)
}

// qUnmoved pages through the data keys still under the master key (their
// first byte is format 1) by version id: the primary key, passing over
// those already under their tenant's key.
const qUnmoved = `SELECT id, tenant, wrapped_key FROM versions WHERE id > ? AND substr(wrapped_key, 1, 1) = x'01' ORDER BY id LIMIT ?`

// KeysMoved tells whether every data key is under its tenant's key: the
// move finished, or the catalog was made with tenant keys.
func (c *Catalog) KeysMoved(ctx context.Context) (bool, error) {
	v, err := c.Meta(ctx, "key_move")
	if err == ErrNotFound {
		return false, nil
	}
	return err == nil && string(v) == "done", err
}

// MoveKeysPage moves the next page of data keys from the master key to
// their tenants' keys, with rewrap, in one transaction that also records
// how far the move went (meta key_move: the last version id, then "done"
// once a page comes back short). A move cut anywhere resumes at the page
// it was in; a key purged meanwhile is not in any page, since the page is
// read and written in one transaction. It returns how many keys it moved
// and whether the move is done.
func (c *Catalog) MoveKeysPage(ctx context.Context, rewrap Rewrap) (int, bool, error) {
	var n int
	var done bool
	err := c.Update(ctx, func(tx *Tx) error {
		var after ids.ID
		var cursor []byte
		err := tx.queryRow(`SELECT value FROM meta WHERE key = 'key_move'`).Scan(&cursor)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return fmt.Errorf("catalog: read the key move's cursor: %w", err)
		case string(cursor) == "done":
			done = true
			return nil
		default:
			copy(after[:], cursor)
		}
		k, last, err := tx.rewrapRows("data keys to move", qUnmoved, []any{after[:], pageSize},
			`UPDATE versions SET wrapped_key = ? WHERE id = ?`, rewrap)
		if err != nil {
			return err
		}
		n, done = k, k < pageSize
		next := []byte("done")
		if !done {
			next = last[:]
		}
		return tx.SetMeta("key_move", next)
	})
	return n, done, err
}

// SetTenantKeyWrap records tenant's key wrapped anew as k, the same key:
// by the tenant's own KMS key k.KMSKey, or under the master key when it is
// empty (tenant set-key), with the change in both logs. ErrNotFound when
// the tenant has no key; ErrChanged when its row changed since it was read
// (was, the wrapped bytes the caller unwrapped).
func (c *Catalog) SetTenantKeyWrap(ctx context.Context, tenant ids.ID, was []byte, k TenantKey, by Actor) error {
	return c.Update(ctx, func(tx *Tx) error {
		if err := tx.requireKeyCheck(k.MasterCheck); err != nil {
			return err
		}
		res, err := tx.exec(`UPDATE tenant_keys SET wrapped = ?, kms_key = ?, kms_service = ? WHERE tenant = ? AND wrapped = ?`,
			k.Wrapped, nullString(k.KMSKey), nullString(k.KMSService), tenant[:], was)
		if err != nil {
			return fmt.Errorf("catalog: set tenant key: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			if _, err := tx.Tenant(tenant); err != nil {
				return err
			}
			return ErrChanged
		}
		return tx.record(by, &tenant, "tenant_set_key", "set_key", "")
	})
}

package catalog

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
)

// Rewrap turns a key wrapped for (tenant, version) into the same key
// wrapped anew: under the new master key in a rotation, under the tenant's
// key in the move to tenant keys. It runs inside a transaction: CPU only,
// no I/O.
type Rewrap func(tenant, version ids.ID, wrapped []byte) ([]byte, error)

// Reseal turns a tenant's webhook secret sealed under the old master key
// into the same secret sealed under the new one, inside the rotation's
// transaction: CPU only, no I/O.
type Reseal func(tenant ids.ID, sealed []byte) ([]byte, error)

// Rotation is what RotateKeys needs of the keys: each turns bytes under
// the old master key into the same bytes under the new one, inside the
// rotation's transaction (CPU only, no I/O).
type Rotation struct {
	Check []byte // the new master key's check value
	// KeyFile is the new master key's file, recorded (meta new_key_file)
	// for a server that runs on: it reads the key there (docs/keys.md).
	KeyFile    string
	TenantKey  Rewrap // a tenant's key (version is the zero id)
	SigningKey Rewrap // a receipts' signing key, wrapped as a data key for the catalog's id
	Secret     Reseal // a webhook secret
	// BeforeCommit, when not nil, runs last inside the transaction (the
	// crash point of tests).
	BeforeCommit func()
}

// ErrKeyRotated refuses a write of something wrapped under a master key
// the catalog no longer names: a rotation committed by another process
// since the key was read (docs/keys.md). The server takes the new key
// within a second; the write is tried again.
var ErrKeyRotated = errors.New("catalog: the master key was rotated a moment ago; this server takes the new key within a second: retry")

// requireKeyCheck refuses with ErrKeyRotated unless check is the master
// key's check value the catalog records; a nil check (nothing under the
// master key) passes.
func (tx *Tx) requireKeyCheck(check []byte) error {
	if check == nil {
		return nil
	}
	var now []byte
	if err := tx.queryRow(`SELECT value FROM meta WHERE key = 'key_check'`).Scan(&now); err != nil {
		return fmt.Errorf("catalog: read key check: %w", err)
	}
	if !bytes.Equal(now, check) {
		return ErrKeyRotated
	}
	return nil
}

// ErrKeysNotMoved is RotateKeys' refusal of a catalog whose data keys are
// not all under their tenants' keys yet: the move comes first.
var ErrKeysNotMoved = errors.New("catalog: data keys are still under the master key; the move to tenant keys comes first")

// RotateKeys re-wraps every tenant key wrapped under the master key and
// the receipts' signing keys, seals every webhook secret again, records
// the new master key's check value and the time of the rotation (meta
// key_check and rotated_at) and an admin-log record, all in one
// transaction: either every key, secret and the check value move to the
// new master key, or none does and the old key keeps working
// (docs/FORMAT.md, "Master-key rotation"). The data keys stay as they
// are, under their tenants' keys. An error from a Rewrap or the Reseal
// rolls everything back. It returns how many tenant keys it re-wrapped.
func (c *Catalog) RotateKeys(ctx context.Context, r Rotation) (int, error) {
	if moved, err := c.KeysMoved(ctx); err != nil || !moved {
		return 0, cmp.Or(err, ErrKeysNotMoved)
	}
	n := 0
	err := c.Update(ctx, func(tx *Tx) error {
		var err error
		// A key of the tenant's own KMS key is not under the master key.
		if n, _, err = tx.rewrapRows("tenant keys", `SELECT tenant, tenant, wrapped FROM tenant_keys WHERE kms_key IS NULL`, nil,
			`UPDATE tenant_keys SET wrapped = ? WHERE tenant = ?`,
			func(tenant, _ ids.ID, wrapped []byte) ([]byte, error) { return r.TenantKey(tenant, ids.ID{}, wrapped) }); err != nil {
			return err
		}
		var cat []byte
		if err := tx.queryRow(`SELECT value FROM meta WHERE key = 'catalog_id'`).Scan(&cat); err != nil {
			return fmt.Errorf("catalog: rotate: read catalog id: %w", err)
		}
		if _, _, err := tx.rewrapRows("signing keys", `SELECT id, ?, wrapped FROM signing_keys`, []any{cat},
			`UPDATE signing_keys SET wrapped = ? WHERE id = ?`, r.SigningKey); err != nil {
			return err
		}
		// Webhook secrets are sealed under the master key too: a secret
		// left under the old one would hold its tenant's events forever. A
		// secret that Secret refuses (it does not open under the old key)
		// fails the rotation, as a key does.
		if _, _, err := tx.rewrapRows("webhook secrets", `SELECT tenant, tenant, secret FROM webhooks`, nil,
			`UPDATE webhooks SET secret = ? WHERE tenant = ?`,
			func(tenant, _ ids.ID, sealed []byte) ([]byte, error) { return r.Secret(tenant, sealed) }); err != nil {
			return err
		}
		if err := tx.SetMeta("key_check", r.Check); err != nil {
			return fmt.Errorf("catalog: rotate: %w", err)
		}
		if err := tx.SetMeta("new_key_file", []byte(r.KeyFile)); err != nil {
			return fmt.Errorf("catalog: rotate: %w", err)
		}
		// OpenCatalog reads rotated_at to tell an operator who starts with
		// the old key file that a rotation replaced it.
		if err := tx.SetMeta("rotated_at", []byte(tx.now.UTC().Format(time.RFC3339Nano))); err != nil {
			return fmt.Errorf("catalog: rotate: %w", err)
		}
		if err := tx.AdminLog(Record{Actor: CLI.Name, Action: "master_key_rotate", Status: 200}); err != nil {
			return fmt.Errorf("catalog: rotate: %w", err)
		}
		if r.BeforeCommit != nil {
			r.BeforeCommit()
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// rewrapRows reads every row of q, each an id, its owner (the tenant, or
// the catalog for a signing key) and bytes under the old master key, then
// writes the bytes turn makes of them with update (arguments: the new
// bytes, the id). The rows are read whole before the first write, so that
// no update moves a row under the read's cursor. It returns how many rows
// it wrote and the last id read, where the next page starts; what names
// the rows in errors.
func (tx *Tx) rewrapRows(what, q string, args []any, update string, turn Rewrap) (int, ids.ID, error) {
	type entry struct {
		id, owner ids.ID
		sealed    []byte
	}
	all, err := queryAll(tx.ctx, tx.tx, what+" to rotate", func(r row) (entry, error) {
		var id, owner []byte
		var e entry
		if err := r.Scan(&id, &owner, &e.sealed); err != nil {
			return e, fmt.Errorf("catalog: read %s to rotate: %w", what, err)
		}
		copy(e.id[:], id)
		copy(e.owner[:], owner)
		return e, nil
	}, q, args...)
	if err != nil {
		return 0, ids.ID{}, err
	}
	if len(all) == 0 {
		return 0, ids.ID{}, nil
	}
	st, err := tx.tx.PrepareContext(tx.ctx, update)
	if err != nil {
		return 0, ids.ID{}, fmt.Errorf("catalog: rotate: %w", err)
	}
	defer st.Close()
	for _, r := range all {
		b, err := turn(r.owner, r.id, r.sealed)
		if err != nil {
			return 0, ids.ID{}, err
		}
		if _, err := st.ExecContext(tx.ctx, b, r.id[:]); err != nil {
			return 0, ids.ID{}, fmt.Errorf("catalog: rotate: write %s: %w", what, err)
		}
	}
	return len(all), all[len(all)-1].id, nil
}

// RotatedAt returns the time of the last master-key rotation, and false
// when the catalog's master key was never rotated.
func (c *Catalog) RotatedAt(ctx context.Context) (time.Time, bool, error) {
	v, err := c.Meta(ctx, "rotated_at")
	if err == ErrNotFound {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	t, err := time.Parse(time.RFC3339Nano, string(v))
	if err != nil {
		return time.Time{}, false, fmt.Errorf("catalog: read rotated_at: %w", err)
	}
	return t, true, nil
}

// KeyCheck returns the master-key check value recorded at init or at the
// last rotation, and whether a rotation replaced the first one.
func (c *Catalog) KeyCheck(ctx context.Context) (check []byte, rotated bool, err error) {
	err = c.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'key_check'`).Scan(&check)
	if err != nil {
		return nil, false, fmt.Errorf("catalog: read key check: %w", err)
	}
	var n int
	c.db.QueryRowContext(ctx, `SELECT count(*) FROM meta WHERE key = 'rotated_at'`).Scan(&n)
	return check, n > 0, nil
}

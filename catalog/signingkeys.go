package catalog

import (
	"context"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
)

// SigningKey is a signing key: its public key in the clear, its Ed25519
// seed wrapped under the master key as a data key is, with the catalog id
// and ID in the place of the tenant and version ids. Purpose says what it
// signs: the erasures' receipts (PurposeReceipt) or the audit logs'
// checkpoints (PurposeLog); a key signs one of them only.
type SigningKey struct {
	KID       string
	ID        ids.ID
	Public    []byte
	Wrapped   []byte
	CreatedAt time.Time
	Purpose   string
}

// What a signing key signs.
const (
	PurposeReceipt = "receipt"
	PurposeLog     = "log"
)

// SigningKeys lists the receipt signing keys, oldest first.
func (c *Catalog) SigningKeys(ctx context.Context) ([]SigningKey, error) {
	return c.SigningKeysFor(ctx, PurposeReceipt)
}

// SigningKeysFor lists the signing keys of purpose, oldest first.
func (c *Catalog) SigningKeysFor(ctx context.Context, purpose string) ([]SigningKey, error) {
	return queryAll(ctx, c.db, "signing keys", func(r row) (SigningKey, error) {
		var k SigningKey
		var id []byte
		var at int64
		err := r.Scan(&k.KID, &id, &k.Public, &k.Wrapped, &at)
		k.ID, k.CreatedAt, k.Purpose = ids.ID(id), fromNanos(at), purpose
		return k, err
	}, `SELECT kid, id, public, wrapped, created_at FROM signing_keys WHERE purpose = ? ORDER BY created_at, kid`, purpose)
}

// AddSigningKey records a signing key unless one of its purpose (empty:
// a receipt key) exists already; it reports whether it added k (two first
// starts racing keep one key).
func (tx *Tx) AddSigningKey(k SigningKey) (bool, error) {
	if k.Purpose == "" {
		k.Purpose = PurposeReceipt
	}
	var n int
	if err := tx.queryRow(`SELECT count(*) FROM signing_keys WHERE purpose = ?`, k.Purpose).Scan(&n); err != nil || n > 0 {
		return false, err
	}
	_, err := tx.exec(`INSERT INTO signing_keys(kid, id, public, wrapped, created_at, purpose) VALUES (?, ?, ?, ?, ?, ?)`,
		k.KID, k.ID[:], k.Public, k.Wrapped, nanos(tx.now), k.Purpose)
	return err == nil, err
}

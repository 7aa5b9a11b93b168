package catalog

import (
	"context"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
)

// SigningKey is a receipt signing key: its public key in the clear, its
// Ed25519 seed wrapped under the master key as a data key is, with the
// catalog id and ID in the place of the tenant and version ids.
type SigningKey struct {
	KID       string
	ID        ids.ID
	Public    []byte
	Wrapped   []byte
	CreatedAt time.Time
}

// SigningKeys lists the receipt signing keys, oldest first.
func (c *Catalog) SigningKeys(ctx context.Context) ([]SigningKey, error) {
	return queryAll(ctx, c.db, "signing keys", func(r row) (SigningKey, error) {
		var k SigningKey
		var id []byte
		var at int64
		err := r.Scan(&k.KID, &id, &k.Public, &k.Wrapped, &at)
		k.ID, k.CreatedAt = ids.ID(id), fromNanos(at)
		return k, err
	}, `SELECT kid, id, public, wrapped, created_at FROM signing_keys ORDER BY created_at, kid`)
}

// AddSigningKey records a signing key unless one exists already; it
// reports whether it added k (two first starts racing keep one key).
func (tx *Tx) AddSigningKey(k SigningKey) (bool, error) {
	var n int
	if err := tx.queryRow(`SELECT count(*) FROM signing_keys`).Scan(&n); err != nil || n > 0 {
		return false, err
	}
	_, err := tx.exec(`INSERT INTO signing_keys(kid, id, public, wrapped, created_at) VALUES (?, ?, ?, ?, ?)`,
		k.KID, k.ID[:], k.Public, k.Wrapped, nanos(tx.now))
	return err == nil, err
}

package catalog

import (
	"context"
	"fmt"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
)

// Manifest is one manifest written to the bucket for a tenant.
type Manifest struct {
	Tenant    ids.ID
	Seq       int64
	Digest    []byte
	CreatedAt time.Time
}

// Manifests lists the tenant's recorded manifests by sequence number.
func (c *Catalog) Manifests(ctx context.Context, tenant ids.ID) ([]Manifest, error) {
	return queryAll(ctx, c.db, "manifests", func(r row) (Manifest, error) {
		m := Manifest{Tenant: tenant}
		var created int64
		if err := r.Scan(&m.Seq, &m.Digest, &created); err != nil {
			return m, fmt.Errorf("catalog: list manifests: %w", err)
		}
		m.CreatedAt = fromNanos(created)
		return m, nil
	}, `SELECT seq, digest, created_at FROM manifests WHERE tenant = ? ORDER BY seq`, tenant[:])
}

// RecordManifest records a manifest written (or found) in the bucket. A
// sequence number already recorded is left as it is.
func (tx *Tx) RecordManifest(tenant ids.ID, seq int64, digest []byte) error {
	_, err := tx.exec(`INSERT OR IGNORE INTO manifests(tenant, seq, digest, state, created_at) VALUES (?, ?, ?, 'written', ?)`,
		tenant[:], seq, digest, nanos(tx.now))
	return err
}

// ForgetManifests forgets manifests deleted from the bucket.
func (tx *Tx) ForgetManifests(tenant ids.ID, seqs []int64) error {
	for _, s := range seqs {
		if _, err := tx.exec(`DELETE FROM manifests WHERE tenant = ? AND seq = ?`, tenant[:], s); err != nil {
			return err
		}
	}
	return nil
}

package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
)

// Signatures (docs/FORMAT.md, "Signatures"): a tenant's signature policy,
// in its tenants row, and its trust anchors, in tenant_anchors. A store
// reads the policy with one row; the anchors only when anchors_at says
// they changed since the archive parsed them.

// SignaturePolicy is a tenant's signature policy.
type SignaturePolicy struct {
	Mode vocab.SignatureMode
	// AllowEncrypted: under require, an encrypted vCon, which cannot be
	// checked, is stored, and its version says so.
	AllowEncrypted bool
	// AnchorsAt is when the anchors last changed, Unix nanoseconds: the
	// key of a parsed copy.
	AnchorsAt int64
}

// Anchor is one trust anchor: a certificate, PEM, by the SHA-256 of its
// DER in lowercase hex.
type Anchor struct {
	Fingerprint string
	PEM         string
}

// SignaturePolicyOf reads a tenant's signature policy.
func (c *Catalog) SignaturePolicyOf(ctx context.Context, tenant ids.ID) (SignaturePolicy, error) {
	var p SignaturePolicy
	err := c.queryRow(ctx, `SELECT signatures, signatures_encrypted, anchors_at FROM tenants WHERE id = ?`, tenant[:]).
		Scan(&p.Mode, &p.AllowEncrypted, &p.AnchorsAt)
	if errors.Is(err, sql.ErrNoRows) {
		return p, ErrNotFound
	}
	if err != nil {
		return p, fmt.Errorf("catalog: read the signature policy: %w", err)
	}
	return p, nil
}

// Anchors lists a tenant's trust anchors, by fingerprint.
func (c *Catalog) Anchors(ctx context.Context, tenant ids.ID) ([]Anchor, error) {
	return queryAll(ctx, c.db, "trust anchors", func(r row) (Anchor, error) {
		var a Anchor
		return a, r.Scan(&a.Fingerprint, &a.PEM)
	}, `SELECT fingerprint, pem FROM tenant_anchors WHERE tenant = ? ORDER BY fingerprint`, tenant[:])
}

// SetSignatures changes a tenant's signature policy, recorded in both
// logs; anchors, when not nil, replace its trust anchors.
func (c *Catalog) SetSignatures(ctx context.Context, id ids.ID, p SignaturePolicy, anchors []Anchor, by Actor) (Tenant, error) {
	if _, err := vocab.ParseSignatureMode(string(p.Mode)); err != nil {
		return Tenant{}, err
	}
	return c.changeTenant(ctx, id, by, "tenant_signatures", "signatures", func(tx *Tx) error {
		if err := tx.updateTenant(`UPDATE tenants SET signatures = ?, signatures_encrypted = ? WHERE id = ?`, string(p.Mode), p.AllowEncrypted, id[:]); err != nil {
			return err
		}
		if anchors == nil {
			return nil
		}
		if _, err := tx.exec(`DELETE FROM tenant_anchors WHERE tenant = ?`, id[:]); err != nil {
			return err
		}
		for _, a := range anchors {
			if _, err := tx.exec(`INSERT OR IGNORE INTO tenant_anchors(tenant, fingerprint, pem) VALUES (?, ?, ?)`, id[:], a.Fingerprint, a.PEM); err != nil {
				return err
			}
		}
		// Strictly later than before, whatever the clock did.
		_, err := tx.exec(`UPDATE tenants SET anchors_at = max(anchors_at + 1, ?) WHERE id = ?`, nanos(tx.now), id[:])
		return err
	})
}

// SignedVersion is a kept version and the signers its signatures were
// verified to (Version.Signers).
type SignedVersion struct {
	ID, UUID ids.ID
	Signers  string
}

// qSigned pages a tenant's kept versions that have signers, in id order:
// a range of versions_by_tenant.
const qSigned = `SELECT id, uuid, signers FROM versions INDEXED BY versions_by_tenant
	WHERE tenant = ? AND id > ? AND purge = 0 AND signers IS NOT NULL ORDER BY id LIMIT ?`

// SignedVersions reads up to limit of a tenant's kept versions with
// signers after the version id after, in id order.
func (c *Catalog) SignedVersions(ctx context.Context, tenant, after ids.ID, limit int) ([]SignedVersion, error) {
	return queryAll(ctx, c.db, "signed versions", func(r row) (SignedVersion, error) {
		var v SignedVersion
		var id, uuid []byte
		err := r.Scan(&id, &uuid, &v.Signers)
		copy(v.ID[:], id)
		copy(v.UUID[:], uuid)
		return v, err
	}, qSigned, tenant[:], after[:], limit)
}

package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/vcon/lawfulbasis"
)

// Lawful bases (docs/FORMAT.md, "Lawful basis"): the columns of versions
// that hold what a version's lawful-basis attachments say, written once
// by InsertVersion, and a tenant's mode (tenants.lawful_basis). A purpose
// is a word of [a-z0-9_] (lawfulbasis.ValidPurpose), so a space separates
// them.

// lawfulCols are the four columns of s: NULL for what is absent.
func lawfulCols(s lawfulbasis.Summary) (basis, expires, granted, refused any) {
	if s.Basis != lawfulbasis.None {
		basis = s.Basis
	}
	if s.Expires != nil {
		expires = nanos(*s.Expires)
	}
	if len(s.Granted) > 0 {
		granted = strings.Join(s.Granted, " ")
	}
	if len(s.Refused) > 0 {
		refused = strings.Join(s.Refused, " ")
	}
	return basis, expires, granted, refused
}

// LawfulBasis is a version's lawful basis as the catalog keeps it.
type LawfulBasis struct {
	Version  ids.ID
	StoredAt time.Time
	lawfulbasis.Summary
}

// LawfulBasisOf returns the lawful basis of a vCon's current version,
// from the catalog alone; ErrNotFound as Current has it.
func (c *Catalog) LawfulBasisOf(ctx context.Context, tenant, uuid ids.ID) (LawfulBasis, error) {
	var lb LawfulBasis
	var id []byte
	var stored int64
	var basis, granted, refused sql.NullString
	var expires sql.NullInt64
	err := c.queryRow(ctx, `SELECT v.id, v.stored_at, v.lawful_basis, v.lawful_expires, v.purposes_granted, v.purposes_refused
		FROM vcons c JOIN versions v ON v.id = c.current WHERE c.tenant = ? AND c.uuid = ? AND v.purge = 0`, tenant[:], uuid[:]).
		Scan(&id, &stored, &basis, &expires, &granted, &refused)
	if errors.Is(err, sql.ErrNoRows) {
		return lb, ErrNotFound
	}
	if err != nil {
		return lb, fmt.Errorf("catalog: read a lawful basis: %w", err)
	}
	copy(lb.Version[:], id)
	lb.StoredAt = fromNanos(stored)
	lb.Basis = basis.String
	lb.Expires = nullTime(expires)
	lb.Granted = strings.Fields(granted.String)
	lb.Refused = strings.Fields(refused.String)
	return lb, nil
}

// SetTenantLawfulMode changes a tenant's lawful-basis mode.
func (tx *Tx) SetTenantLawfulMode(id ids.ID, mode vocab.LawfulMode) error {
	return tx.updateTenant(`UPDATE tenants SET lawful_basis = ? WHERE id = ?`, string(mode), id[:])
}

// SetLawfulMode changes a tenant's lawful-basis mode, recorded in both
// logs. A store reads it as it commits (LawfulModeOf).
func (c *Catalog) SetLawfulMode(ctx context.Context, id ids.ID, mode vocab.LawfulMode, by Actor) (Tenant, error) {
	if _, err := vocab.ParseLawfulMode(string(mode)); err != nil {
		return Tenant{}, err
	}
	return c.changeTenant(ctx, id, by, "tenant_lawful_basis", "lawful_basis", func(tx *Tx) error { return tx.SetTenantLawfulMode(id, mode) })
}

// LawfulModeOf reads a tenant's lawful-basis mode.
func (c *Catalog) LawfulModeOf(ctx context.Context, id ids.ID) (vocab.LawfulMode, error) {
	var m vocab.LawfulMode
	err := c.queryRow(ctx, `SELECT lawful_basis FROM tenants WHERE id = ?`, id[:]).Scan(&m)
	if errors.Is(err, sql.ErrNoRows) {
		return m, ErrNotFound
	}
	return m, err
}

// CurrentLawful returns the lawful basis of the current version of each
// of a tenant's vCons in uuids, by uuid, in one read of their rows: a
// listing or a search withholds what a purpose may not see. A uuid with
// no current version is left out.
func (c *Catalog) CurrentLawful(ctx context.Context, tenant ids.ID, uuids []ids.ID) (map[ids.ID]lawfulbasis.Summary, error) {
	out := make(map[ids.ID]lawfulbasis.Summary, len(uuids))
	if len(uuids) == 0 {
		return out, nil
	}
	args := make([]any, 0, len(uuids)+1)
	args = append(args, tenant[:])
	for _, u := range uuids {
		args = append(args, u[:])
	}
	err := eachRow(ctx, c.db, "lawful bases", func(r row) error {
		var u []byte
		var basis, granted, refused sql.NullString
		var expires sql.NullInt64
		if err := r.Scan(&u, &basis, &expires, &granted, &refused); err != nil {
			return err
		}
		var id ids.ID
		copy(id[:], u)
		out[id] = lawfulbasis.Summary{Basis: basis.String, Expires: nullTime(expires),
			Granted: strings.Fields(granted.String), Refused: strings.Fields(refused.String)}
		return nil
	}, `SELECT c.uuid, v.lawful_basis, v.lawful_expires, v.purposes_granted, v.purposes_refused
		FROM vcons c JOIN versions v ON v.id = c.current
		WHERE c.tenant = ? AND v.purge = 0 AND c.uuid IN (?`+strings.Repeat(",?", len(uuids)-1)+`)`, args...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

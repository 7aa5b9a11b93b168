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

// Erasure at expiry (docs/lawful-basis.md, "Expiry"; docs/FORMAT.md,
// "Lawful basis"): the sweep erases, under a tenant that enforces, the
// vCons whose current version's basis expired, as an erasure by uuids
// whose reason is ReasonLawfulExpired.

// ReasonLawfulExpired is the reason of an erasure at expiry, the word a
// read denied for an expired basis answers.
const ReasonLawfulExpired = lawfulbasis.WhyExpired

// ErrNothingExpired is BeginErasure's answer at expiry when no vCon of
// the tenant is due any more: nothing was recorded.
var ErrNothingExpired = errors.New("catalog: no vCon of the tenant has an expired lawful basis")

// qExpired reads a tenant's vCons whose current version's basis expired
// before a time, none held, in expiry order: a range of
// versions_lawful_expires, which holds kept versions only, each looked up
// in vcons by its key. qExpiredTenants asks it of each tenant that
// enforces and is not deleting; qNextExpiry reads the first of the range
// whatever the time.
const (
	qExpired = `SELECT v.uuid, v.id FROM versions v INDEXED BY versions_lawful_expires
	CROSS JOIN vcons c ON c.tenant = v.tenant AND c.uuid = v.uuid
	WHERE v.tenant = ? AND v.lawful_expires IS NOT NULL AND v.lawful_expires < ? AND v.purge = 0
	  AND c.current = v.id AND c.held = 0
	ORDER BY v.lawful_expires LIMIT ?`
	qExpiredTenants = `SELECT id FROM tenants
	WHERE lawful_basis <> 'off' AND NOT EXISTS (SELECT 1 FROM tenant_deletions d WHERE d.tenant = tenants.id)
	  AND EXISTS (SELECT 1 FROM versions v INDEXED BY versions_lawful_expires
		CROSS JOIN vcons c ON c.tenant = v.tenant AND c.uuid = v.uuid
		WHERE v.tenant = tenants.id AND v.lawful_expires IS NOT NULL AND v.lawful_expires < ? AND v.purge = 0
		  AND c.current = v.id AND c.held = 0 LIMIT 1)
	ORDER BY id`
	qNextExpiry = `SELECT v.lawful_expires FROM versions v INDEXED BY versions_lawful_expires
	CROSS JOIN vcons c ON c.tenant = v.tenant AND c.uuid = v.uuid
	WHERE v.tenant = ? AND v.lawful_expires IS NOT NULL AND v.purge = 0 AND c.current = v.id AND c.held = 0
	ORDER BY v.lawful_expires LIMIT 1`
)

// ExpiredTenants lists the tenants, in id order, that enforce (mode
// enforce or require), are not deleting, and hold a vCon whose current
// version's basis expired before `before` and is not held.
func (c *Catalog) ExpiredTenants(ctx context.Context, before time.Time) ([]ids.ID, error) {
	return queryAll(ctx, c.db, "expired lawful bases", scanID, qExpiredTenants, nanos(before))
}

// NextLawfulExpiry is the earliest expiration of a tenant's current
// versions not held, whatever its mode; nil when none expires.
func (c *Catalog) NextLawfulExpiry(ctx context.Context, tenant ids.ID) (*time.Time, error) {
	var n sql.NullInt64
	err := c.queryRow(ctx, qNextExpiry, tenant[:]).Scan(&n)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("catalog: read the next lawful-basis expiry: %w", err)
	}
	return nullTime(n), nil
}

// expiredMatches is what an erasure at expiry takes, chosen in its first
// transaction so that a version stored since the sweep looked counts: up
// to r.Limit vCons, each whole. It writes each one's vcon.expired event
// (its uuid, the version whose basis expired), which so commits with the
// erasure that takes it, ahead of the vCon's vcon.deleted.
func (tx *Tx) expiredMatches(r EraseRequest) (map[ids.ID][]ids.ID, error) {
	type due struct{ uuid, version []byte }
	var dues []due
	err := eachRow(tx.ctx, tx.tx, "expired lawful bases", func(rw row) error {
		var d due
		err := rw.Scan(&d.uuid, &d.version)
		dues = append(dues, d)
		return err
	}, qExpired, r.Tenant[:], nanos(*r.ExpiredBefore), r.Limit)
	if err != nil {
		return nil, err
	}
	if len(dues) == 0 {
		return nil, ErrNothingExpired
	}
	matched := make(map[ids.ID][]ids.ID, len(dues))
	for _, d := range dues {
		matched[ids.ID(d.uuid)] = nil
		if _, err := tx.exec(eventInsert("?", "?", `'`+EventExpired+`'`)+`?`, d.uuid, d.version, r.Tenant[:]); err != nil {
			return nil, err
		}
	}
	return matched, nil
}

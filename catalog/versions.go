package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/vcon-server/vcon-server/ids"
)

// Location says where a version's sealed bytes are.
type Location string

const (
	InDir  Location = "dir"    // a file in the data directory
	InS3   Location = "s3"     // an object in the bucket
	Packed Location = "packed" // a row of a Parquet pack file in the bucket
)

// PurgeState is how far a version's purge went.
type PurgeState int

const (
	Kept         PurgeState = 0 // not being purged
	KeyDestroyed PurgeState = 1 // the data key is gone; bytes may remain
)

var (
	// ErrExists is returned when a create finds a current version.
	ErrExists = errors.New("catalog: the vCon already has a current version")
	// ErrHeld is returned when a legal hold forbids the change.
	ErrHeld = errors.New("catalog: the vCon is under legal hold")
	// ErrChanged is returned when the rows a commit replaces moved since
	// the work started (docs/FORMAT.md, invariant 6).
	ErrChanged = errors.New("catalog: the rows changed meanwhile")
)

// Version is one stored version of a vCon.
type Version struct {
	ID              ids.ID
	Tenant          ids.ID
	UUID            ids.ID
	StoredAt        time.Time
	ContentType     string
	ContentEncoding string
	Form            Form
	Size            int64
	SealedSize      int64
	WrappedKey      []byte // nil once the purge destroyed it
	HiddenAt        *time.Time
	Purge           PurgeState
	Location        Location
	PackFile        *ids.ID
	PackOffset      int64
	PackLength      int64
	PackKey         string // the pack file's object key, for packed versions
	Current         bool   // filled by the queries that know
	// BodyMAC is the keyed hash of the body that recognises a retried
	// store (docs/FORMAT.md, "Store"): written by InsertVersion, never
	// read into a Version.
	BodyMAC []byte
}

const versionCols = `v.id, v.tenant, v.uuid, v.stored_at, v.content_type, v.content_encoding, v.form, v.size, v.sealed_size,
	v.wrapped_key, v.hidden_at, v.purge, v.location, v.pack_file, v.pack_offset, v.pack_length,
	(SELECT p.object_key FROM pack_files p WHERE p.id = v.pack_file)`

func scanVersion(row interface{ Scan(...any) error }, extra ...any) (Version, error) {
	var v Version
	var id, tenant, uuid, pack []byte
	var stored int64
	var hidden, off, length sql.NullInt64
	var packKey sql.NullString
	dest := append([]any{&id, &tenant, &uuid, &stored, &v.ContentType, &v.ContentEncoding, &v.Form, &v.Size, &v.SealedSize,
		&v.WrappedKey, &hidden, &v.Purge, &v.Location, &pack, &off, &length, &packKey}, extra...)
	if err := row.Scan(dest...); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return v, ErrNotFound
		}
		return v, fmt.Errorf("catalog: read version: %w", err)
	}
	copy(v.ID[:], id)
	copy(v.Tenant[:], tenant)
	copy(v.UUID[:], uuid)
	v.StoredAt = fromNanos(stored)
	v.HiddenAt = nullTime(hidden)
	if pack != nil {
		var p ids.ID
		copy(p[:], pack)
		v.PackFile = &p
	}
	v.PackOffset, v.PackLength, v.PackKey = off.Int64, length.Int64, packKey.String
	return v, nil
}

// StoreMode says what a store does with an existing current version.
type StoreMode int

const (
	CreateOnly StoreMode = iota // refuse with ErrExists (POST)
	Replace                     // hide it (PUT)
)

// InsertVersion records a new version and makes it current, hiding the
// version it replaces. It reports whether one was replaced. v.WrappedKey is
// persisted here for the first time (invariant 2). A uuid an erasure took
// whole is refused with ErrErased (docs/erasure.md).
func (tx *Tx) InsertVersion(v Version, mode StoreMode) (replaced bool, err error) {
	if err := tx.refuseErased(v.Tenant, v.UUID); err != nil {
		return false, err
	}
	var cur []byte
	err = tx.queryRow(`SELECT current FROM vcons WHERE tenant = ? AND uuid = ?`, v.Tenant[:], v.UUID[:]).Scan(&cur)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.exec(`INSERT INTO vcons(tenant, uuid, current) VALUES (?, ?, ?)`, v.Tenant[:], v.UUID[:], v.ID[:]); err != nil {
			return false, err
		}
	case err != nil:
		return false, err
	default:
		if cur != nil {
			if mode == CreateOnly {
				return false, ErrExists
			}
			if _, err := tx.exec(`UPDATE versions SET hidden_at = ? WHERE id = ? AND hidden_at IS NULL`, nanos(tx.now), cur); err != nil {
				return false, err
			}
			replaced = true
		}
		if _, err := tx.exec(`UPDATE vcons SET current = ? WHERE tenant = ? AND uuid = ?`, v.ID[:], v.Tenant[:], v.UUID[:]); err != nil {
			return false, err
		}
	}
	_, err = tx.exec(`INSERT INTO versions(id, tenant, uuid, stored_at, content_type, content_encoding, form, size, sealed_size, wrapped_key, location, body_mac)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v.ID[:], v.Tenant[:], v.UUID[:], nanos(v.StoredAt), v.ContentType, v.ContentEncoding, string(v.Form), v.Size, v.SealedSize, v.WrappedKey, string(v.Location), v.BodyMAC)
	return replaced, err
}

// HasCurrent reports whether the vCon has a current version.
func (c *Catalog) HasCurrent(ctx context.Context, tenant, uuid ids.ID) (bool, error) {
	var n int
	err := c.queryRow(ctx, `SELECT count(*) FROM vcons WHERE tenant = ? AND uuid = ? AND current IS NOT NULL`, tenant[:], uuid[:]).Scan(&n)
	return n > 0, err
}

// Current returns the current version of a vCon; ErrNotFound when it has
// none (never stored, deleted, or another tenant's).
func (c *Catalog) Current(ctx context.Context, tenant, uuid ids.ID) (Version, error) {
	v, err := scanVersion(c.queryRow(ctx, `SELECT `+versionCols+` FROM vcons c JOIN versions v ON v.id = c.current
		WHERE c.tenant = ? AND c.uuid = ? AND v.purge = 0`, tenant[:], uuid[:]))
	v.Current = err == nil
	return v, err
}

// Version returns one version by id, whatever its state.
func (c *Catalog) Version(ctx context.Context, id ids.ID) (Version, error) {
	return scanVersion(c.queryRow(ctx, `SELECT `+versionCols+` FROM versions v WHERE v.id = ?`, id[:]))
}

// qVersions reads a vCon's versions, newest first: its range of
// versions_by_uuid, in id order (CROSS JOIN keeps versions the outer
// loop: SQLite else read the tenant's every version on versions_by_tenant
// rather than sort a vCon's few).
const qVersions = `SELECT ` + versionCols + `, (c.current IS v.id) FROM versions v
	CROSS JOIN vcons c ON c.tenant = v.tenant AND c.uuid = v.uuid
	WHERE v.tenant = ? AND v.uuid = ? AND v.purge = 0 ORDER BY v.id DESC`

// Versions lists the kept versions of a vCon, newest first.
func (c *Catalog) Versions(ctx context.Context, tenant, uuid ids.ID) ([]Version, error) {
	return c.versions(ctx, qVersions, true, tenant[:], uuid[:])
}

// qCurrent pages through a tenant's vCons by uuid: the primary key, whose
// range holds the deleted ones too (no index of those with a current
// version pays for itself at every store).
const qCurrent = `SELECT uuid FROM vcons
	WHERE tenant = ? AND uuid > ? AND current IS NOT NULL ORDER BY uuid LIMIT ?`

// ListCurrent pages through a tenant's vCons that have a current version,
// in uuid byte order, after the given uuid.
func (c *Catalog) ListCurrent(ctx context.Context, tenant ids.ID, after ids.ID, limit int) ([]ids.ID, error) {
	return c.idList(ctx, qCurrent, tenant[:], after[:], limit)
}

// Hide clears a vCon's current version and hides every version of it (a
// DELETE). It returns the versions this call hid; ErrNotFound when the vCon
// has no current version, ErrHeld when it is held.
func (tx *Tx) Hide(tenant, uuid ids.ID) ([]ids.ID, error) {
	var cur []byte
	var held bool
	err := tx.queryRow(`SELECT current, held FROM vcons WHERE tenant = ? AND uuid = ?`, tenant[:], uuid[:]).Scan(&cur, &held)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && cur == nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if held {
		return nil, ErrHeld
	}
	rows, err := tx.query(`SELECT id FROM versions WHERE tenant = ? AND uuid = ? AND hidden_at IS NULL`, tenant[:], uuid[:])
	if err != nil {
		return nil, err
	}
	var hid []ids.ID
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			rows.Close()
			return nil, err
		}
		var id ids.ID
		copy(id[:], b)
		hid = append(hid, id)
	}
	rows.Close()
	if _, err := tx.exec(`UPDATE versions SET hidden_at = ? WHERE tenant = ? AND uuid = ? AND hidden_at IS NULL`, nanos(tx.now), tenant[:], uuid[:]); err != nil {
		return nil, err
	}
	if _, err := tx.exec(`UPDATE vcons SET current = NULL WHERE tenant = ? AND uuid = ?`, tenant[:], uuid[:]); err != nil {
		return nil, err
	}
	return hid, nil
}

// VersionIDs lists every version of a vCon the catalog still has: current,
// hidden, or with its purge under way.
func (tx *Tx) VersionIDs(tenant, uuid ids.ID) ([]ids.ID, error) {
	return tx.idsOf(`SELECT id FROM versions WHERE tenant = ? AND uuid = ?`, tenant[:], uuid[:])
}

// DestroyKeys is the first step of a purge: for each version that is, as
// this transaction sees it, still hidden, not held, not already purging and
// past its tenant's retention (defaultRetention when the tenant has no
// override), it deletes the wrapped data key. It returns the versions whose
// key it destroyed; the others are left as they were (invariant 4).
func (tx *Tx) DestroyKeys(versions []ids.ID, defaultRetention time.Duration) ([]Version, error) {
	return tx.destroyKeysWhere(qPurgeable, versions, int64(defaultRetention), nanos(tx.now))
}

// qPurgeable reads a version whose purge may start: hidden, not held, not
// purging, past its tenant's retention.
const qPurgeable = `SELECT ` + versionCols + ` FROM versions v
	JOIN vcons c ON c.tenant = v.tenant AND c.uuid = v.uuid
	JOIN tenants t ON t.id = v.tenant
	WHERE v.id = ? AND v.purge = 0 AND v.hidden_at IS NOT NULL AND c.held = 0
	  AND v.hidden_at + COALESCE(t.retention_days * 86400000000000, ?) <= ?`

// destroyKeysWhere destroys the key of each of versions that q, given the
// version's id then args, finds eligible in this transaction, and returns
// those versions; q's own conditions are the invariant 4 check of the
// caller's kind of purge.
func (tx *Tx) destroyKeysWhere(q string, versions []ids.ID, args ...any) ([]Version, error) {
	var out []Version
	for _, id := range versions {
		v, err := scanVersion(tx.queryRow(q, append([]any{id[:]}, args...)...))
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := tx.destroyKey(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// destroyKey deletes v's wrapped data key and its search tokens: the row
// found eligible by the caller's own query, in this transaction.
func (tx *Tx) destroyKey(v *Version) error {
	if _, err := tx.exec(`UPDATE versions SET wrapped_key = NULL, purge = ? WHERE id = ?`, KeyDestroyed, v.ID[:]); err != nil {
		return err
	}
	if err := tx.dropTokens(v.ID); err != nil {
		return err
	}
	v.WrappedKey, v.Purge = nil, KeyDestroyed
	return nil
}

// DueCursor is where a sweep stands among the versions whose purge may be
// due: the hidden time and id of the last one PurgeDue listed. The zero
// value is the start.
type DueCursor struct {
	hiddenAt int64
	id       ids.ID
}

// qDue pages through the hidden versions whose purge may start, by hidden
// time then id: versions_hidden, from the cursor up to the hidden time the
// shortest retention of any tenant has reached; each looked up in vcons
// and tenants (CROSS JOIN keeps versions the outer loop).
const qDue = `SELECT v.id, v.hidden_at FROM versions v
	CROSS JOIN vcons c ON c.tenant = v.tenant AND c.uuid = v.uuid
	CROSS JOIN tenants t ON t.id = v.tenant
	WHERE v.hidden_at IS NOT NULL AND v.purge = 0 AND (v.hidden_at, v.id) > (?, ?)
	  AND v.hidden_at <= ? - (SELECT min(COALESCE(retention_days * 86400000000000, ?)) FROM tenants)
	  AND c.held = 0 AND v.hidden_at + COALESCE(t.retention_days * 86400000000000, ?) <= ?
	ORDER BY v.hidden_at, v.id LIMIT ?`

// PurgeDue lists up to limit versions after the cursor whose purge may
// start: hidden, not held, past retention as the tenants' settings say
// now; in the order they were hidden. It returns the cursor of the next
// page, so that a sweep passes each version once, held ones included.
func (c *Catalog) PurgeDue(ctx context.Context, defaultRetention time.Duration, now time.Time, after DueCursor, limit int) ([]ids.ID, DueCursor, error) {
	rows, err := c.db.QueryContext(ctx, qDue, after.hiddenAt, after.id[:],
		nanos(now), int64(defaultRetention), int64(defaultRetention), nanos(now), limit)
	if err != nil {
		return nil, after, fmt.Errorf("catalog: list purges due: %w", err)
	}
	defer rows.Close()
	var out []ids.ID
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b, &after.hiddenAt); err != nil {
			return nil, after, fmt.Errorf("catalog: list purges due: %w", err)
		}
		copy(after.id[:], b)
		out = append(out, after.id)
	}
	return out, after, rows.Err()
}

// Purging lists the versions whose key is destroyed and whose bytes may
// still exist: the purges a crash or a failure left unfinished.
func (c *Catalog) Purging(ctx context.Context) ([]Version, error) {
	return c.versions(ctx, `SELECT `+versionCols+` FROM versions v WHERE v.purge = ? ORDER BY v.id`, false, KeyDestroyed)
}

// FinishPurge forgets a purged version once its bytes are proven gone,
// and the vCon itself when nothing of it is left and it is not held.
func (tx *Tx) FinishPurge(id ids.ID) error {
	v, err := scanVersion(tx.queryRow(`SELECT `+versionCols+` FROM versions v WHERE v.id = ?`, id[:]))
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if v.Purge != KeyDestroyed {
		return fmt.Errorf("catalog: finish purge of a version whose key is not destroyed")
	}
	if _, err := tx.exec(`DELETE FROM versions WHERE id = ?`, id[:]); err != nil {
		return err
	}
	_, err = tx.exec(`DELETE FROM vcons WHERE tenant = ? AND uuid = ? AND current IS NULL AND held = 0
		AND NOT EXISTS (SELECT 1 FROM versions WHERE tenant = ? AND uuid = ?)`, v.Tenant[:], v.UUID[:], v.Tenant[:], v.UUID[:])
	return err
}

// DestroyKeyOf destroys a version's key whatever its state: for a start
// that finds the storage's tombstone of a version the catalog still opens
// (a catalog restored from a backup older than the purge).
func (tx *Tx) DestroyKeyOf(id ids.ID) (bool, error) {
	res, err := tx.exec(`UPDATE versions SET wrapped_key = NULL, purge = ?, hidden_at = COALESCE(hidden_at, ?) WHERE id = ? AND purge = 0`, KeyDestroyed, nanos(tx.now), id[:])
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	if n > 0 {
		if _, err := tx.exec(qUncurrent, id[:]); err != nil {
			return false, err
		}
		if err := tx.dropTokens(id); err != nil {
			return false, err
		}
	}
	return n > 0, nil
}

// qUncurrent clears the current version of the vCon of version ?1 when it
// is that version: the vCon found by its key, from the version's row.
const qUncurrent = `UPDATE vcons SET current = NULL
	WHERE tenant = (SELECT tenant FROM versions WHERE id = ?1) AND uuid = (SELECT uuid FROM versions WHERE id = ?1) AND current = ?1`

// SetHold sets or releases a legal hold on a uuid of a tenant. A hold may
// be set before the vCon arrives.
func (tx *Tx) SetHold(tenant, uuid ids.ID, held bool) error {
	if held {
		_, err := tx.exec(`INSERT INTO vcons(tenant, uuid, held) VALUES (?, ?, 1) ON CONFLICT(tenant, uuid) DO UPDATE SET held = 1`, tenant[:], uuid[:])
		return err
	}
	if _, err := tx.exec(`UPDATE vcons SET held = 0 WHERE tenant = ? AND uuid = ?`, tenant[:], uuid[:]); err != nil {
		return err
	}
	_, err := tx.exec(`DELETE FROM vcons WHERE tenant = ? AND uuid = ? AND current IS NULL
		AND NOT EXISTS (SELECT 1 FROM versions WHERE tenant = ? AND uuid = ?)`, tenant[:], uuid[:], tenant[:], uuid[:])
	return err
}

// Holds lists a tenant's held uuids.
func (c *Catalog) Holds(ctx context.Context, tenant ids.ID) ([]ids.ID, error) {
	return c.idList(ctx, `SELECT uuid FROM vcons WHERE tenant = ? AND held = 1 ORDER BY uuid`, tenant[:])
}

// CountByLocation counts versions (purged or not) at each location.
func (c *Catalog) CountByLocation(ctx context.Context) (map[Location]int, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT location, count(*) FROM versions GROUP BY location`)
	if err != nil {
		return nil, fmt.Errorf("catalog: count versions: %w", err)
	}
	defer rows.Close()
	out := map[Location]int{}
	for rows.Next() {
		var l string
		var n int
		if err := rows.Scan(&l, &n); err != nil {
			return nil, err
		}
		out[Location(l)] = n
	}
	return out, rows.Err()
}

// Exists reports whether the catalog has a row for the version.
func (c *Catalog) Exists(ctx context.Context, id ids.ID) (bool, error) {
	var n int
	err := c.queryRow(ctx, `SELECT count(*) FROM versions WHERE id = ?`, id[:]).Scan(&n)
	return n > 0, err
}

func (c *Catalog) idList(ctx context.Context, q string, args ...any) ([]ids.ID, error) {
	rows, err := c.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	return scanIDs(rows)
}

// scanIDs reads a one-column result of ids, and closes it.
func scanIDs(rows *sql.Rows) ([]ids.ID, error) {
	defer rows.Close()
	var out []ids.ID
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		var id ids.ID
		copy(id[:], b)
		out = append(out, id)
	}
	return out, rows.Err()
}

// TenantsWithPacked counts the tenants that have packed versions.
func (c *Catalog) TenantsWithPacked(ctx context.Context) (int, error) {
	var n int
	err := c.queryRow(ctx, `SELECT count(DISTINCT tenant) FROM versions WHERE location = ?`, string(Packed)).Scan(&n)
	return n, err
}

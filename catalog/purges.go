package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
)

// The catalog counts its purges in meta (key "purges"): one more in every
// transaction that destroys data keys. Storage keeps the count as it stood
// before the purge's tombstones were written, so a start that finds a
// higher count in storage than in the catalog knows the catalog was
// restored from an older copy (docs/FORMAT.md, "Purge of an object",
// "Restore"). A catalog without the key has never been started by a
// server that counts: what it missed is unknown.

const metaPurges = "purges"

// PurgeCount reads the catalog's count of purges; known is false when the
// catalog has none recorded yet.
func (c *Catalog) PurgeCount(ctx context.Context) (n int64, known bool, err error) {
	var v []byte
	err = c.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, metaPurges).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("catalog: read the purge count: %w", err)
	}
	n, err = strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("catalog: the purge count %q is not a number", v)
	}
	return n, true, nil
}

// CountPurge adds one to the count of purges, in the transaction that
// destroys their keys, and returns the new count.
func (tx *Tx) CountPurge() (int64, error) {
	n, _, err := tx.purgeCount()
	if err != nil {
		return 0, err
	}
	n++
	return n, tx.SetMeta(metaPurges, []byte(strconv.FormatInt(n, 10)))
}

// RaisePurgeCount records a count of purges of at least n; a count is
// never lowered.
func (tx *Tx) RaisePurgeCount(n int64) error {
	have, known, err := tx.purgeCount()
	if err != nil {
		return err
	}
	if known && have >= n {
		return nil
	}
	return tx.SetMeta(metaPurges, []byte(strconv.FormatInt(max(have, n), 10)))
}

func (tx *Tx) purgeCount() (n int64, known bool, err error) {
	var v []byte
	err = tx.queryRow(`SELECT value FROM meta WHERE key = ?`, metaPurges).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	n, err = strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("catalog: the purge count %q is not a number", v)
	}
	return n, true, nil
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
	var out []ids.ID
	err := eachRow(ctx, c.db, "purges due", func(r row) error {
		var b []byte
		if err := r.Scan(&b, &after.hiddenAt); err != nil {
			return fmt.Errorf("catalog: read purges due: %w", err)
		}
		copy(after.id[:], b)
		out = append(out, after.id)
		return nil
	}, qDue, after.hiddenAt, after.id[:], nanos(now), int64(defaultRetention), int64(defaultRetention), nanos(now), limit)
	if err != nil {
		return nil, after, err
	}
	return out, after, nil
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

// CountPurging counts versions whose purge was cut off after the key.
func (c *Catalog) CountPurging(ctx context.Context, tenant ids.ID) (int, error) {
	var n int
	err := c.db.QueryRowContext(ctx, `SELECT count(*) FROM versions WHERE tenant = ? AND purge <> 0`, tenant[:]).Scan(&n)
	return n, err
}

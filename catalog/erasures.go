package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
)

// Erasures for a data subject (docs/erasure.md; docs/FORMAT.md,
// "Erasure"). One transaction chooses what an erasure takes, hides it and
// destroys its keys, records the erasure and its uuids; the purges then
// go on as every purge does, and a last transaction records the erasure
// done with its receipt once no version it took is left.

var (
	// ErrErased is returned by a store of a uuid an erasure took whole.
	ErrErased = errors.New("catalog: the vCon was erased")
	// ErrSearchOff is returned by an erasure by party of a tenant whose
	// search is off.
	ErrSearchOff = errors.New("catalog: the tenant's search is off")
	// ErrIndexIncomplete is returned by an erasure by party while the
	// tenant's search index is not built: it would erase less than it
	// claims.
	ErrIndexIncomplete = errors.New("catalog: the tenant's search index is not built yet")
)

// TooManyError refuses an erasure that matches more vCons than its bound,
// before anything changed. Matched is how many it counted: Limit+1 for a
// party filter, which stops reading there.
type TooManyError struct{ Matched, Limit int }

func (e *TooManyError) Error() string {
	return fmt.Sprintf("catalog: the erasure matches more than %d vCons", e.Limit)
}

// Erasure is one erasure and what it took.
type Erasure struct {
	ID           ids.ID
	Tenant       ids.ID
	Kind         string // tel, mailto, name or uuids; never the value
	Actor        string
	Label        string
	RequestedAt  time.Time
	Unsearchable int
	DoneAt       *time.Time
	Error        string // why its purges wait, while not done
	Receipt      string
	NotFound     int    // uuids named that the tenant holds nothing of
	Digest       string // of its lists, in its receipt when they hold more than 100 entries (ListsDigest)
	Totals       ErasedTotals
	Running      bool // batches of it are still to take
	// Reason is why the server erased on its own: ReasonLawfulExpired;
	// "" for an erasure a request asked for.
	Reason string
	// AuditIndex is the index of its record (action erase) in the
	// tenant's audit log once done; nil for one finished before the
	// logs kept it.
	AuditIndex *uint64
}

// ErasedTotals counts an erasure's rows: the vCons it took and their
// versions, and the held ones it left.
type ErasedTotals struct{ Vcons, Versions, Held int }

// Erased is one uuid an erasure took, or found held.
type Erased struct {
	UUID     ids.ID
	Versions int  // versions whose key this erasure destroyed
	Whole    bool // nothing of the vCon is kept: a later store of it is refused
	Held     bool // under legal hold: nothing of it changed
}

// EraseRequest says what an erasure takes: the vCons whose versions hold
// Token in the tenant's index, or the uuids given.
type EraseRequest struct {
	ID, Tenant   ids.ID
	Kind         string
	Actor, Label string
	Token        *[16]byte
	UUIDs        []ids.ID
	Limit        int // vCons at most; more is a TooManyError
	// Unsearchable is the count of the tenant's encrypted kept versions,
	// read before the transaction (CountUnsearchable): a party erasure says
	// how many versions its filter could not reach.
	Unsearchable int
	// NotFound counts the uuids named that the tenant held nothing of,
	// read before the transaction (Known), and left out of UUIDs.
	NotFound int
	// ExpiredBefore, when set, makes it an erasure at expiry: it takes
	// the tenant's vCons whose lawful basis expired before it
	// (expiredMatches), not UUIDs.
	ExpiredBefore *time.Time
}

// eraseOne takes what an erasure takes of one vCon: all of it when
// matched is nil (a uuids erasure), when its current version is matched,
// or when it has none and every kept version is matched; else the matched
// versions only, which are hidden ones. It returns nil for a uuid the
// tenant holds nothing of, and for a vCon a party erasure finds nothing
// of.
func (tx *Tx) eraseOne(tenant, uuid ids.ID, matched map[ids.ID]bool, byUUID bool) (*Erased, []Version, error) {
	item := &Erased{UUID: uuid}
	var cur []byte
	var held bool
	err := tx.queryRow(`SELECT current, held FROM vcons WHERE tenant = ? AND uuid = ?`, tenant[:], uuid[:]).Scan(&cur, &held)
	if errors.Is(err, sql.ErrNoRows) {
		// Nothing of it is held: a uuids erasure counts it in not_found,
		// and records nothing of it, so a later store is not refused
		// (docs/erasure.md).
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if held {
		item.Held = true
		return item, nil, nil
	}
	kept, err := queryAll(tx.ctx, tx.tx, "kept versions", scanID, `SELECT id FROM versions WHERE tenant = ? AND uuid = ? AND purge = 0`, tenant[:], uuid[:])
	if err != nil {
		return nil, nil, err
	}
	item.Whole = byUUID || (cur != nil && matched[ids.ID(cur)])
	if cur == nil && !byUUID {
		item.Whole = true
		for _, id := range kept {
			item.Whole = item.Whole && matched[id]
		}
	}
	take := kept
	if item.Whole {
		if _, err := tx.exec(`UPDATE versions SET hidden_at = ? WHERE tenant = ? AND uuid = ? AND hidden_at IS NULL`, nanos(tx.now), tenant[:], uuid[:]); err != nil {
			return nil, nil, err
		}
		if _, err := tx.exec(`UPDATE vcons SET current = NULL WHERE tenant = ? AND uuid = ?`, tenant[:], uuid[:]); err != nil {
			return nil, nil, err
		}
	} else {
		take = nil
		for _, id := range kept {
			if matched[id] {
				take = append(take, id)
			}
		}
	}
	took, err := tx.eraseKeys(take)
	if err != nil {
		return nil, nil, err
	}
	item.Versions = len(took)
	if !item.Whole && item.Versions == 0 {
		return nil, nil, nil
	}
	return item, took, nil
}

// eraseKeys is DestroyKeys without the retention: an erasure overrides
// it. The version must still be hidden and its vCon not held, as every
// purge's key transaction checks (docs/FORMAT.md, invariant 4).
func (tx *Tx) eraseKeys(versions []ids.ID) ([]Version, error) {
	return tx.destroyKeysWhere(qErasable, versions)
}

const qErasable = `SELECT ` + versionCols + ` FROM versions v
	JOIN vcons c ON c.tenant = v.tenant AND c.uuid = v.uuid
	WHERE v.id = ? AND v.purge = 0 AND v.hidden_at IS NOT NULL AND c.held = 0`

func (tx *Tx) searchBuilt(tenant ids.ID) bool {
	var built bool
	err := tx.queryRow(`SELECT search_built FROM tenants WHERE id = ?`, tenant[:]).Scan(&built)
	return err == nil && built
}

// refuseErased is ErrErased when an erasure took the vCon whole: a
// recorder's retry must not bring it back (docs/erasure.md).
func (tx *Tx) refuseErased(tenant, uuid ids.ID) error {
	var n int
	err := tx.queryRow(`SELECT count(*) FROM erased INDEXED BY erased_whole WHERE tenant = ? AND uuid = ? AND whole = 1`, tenant[:], uuid[:]).Scan(&n)
	if err != nil {
		return err
	}
	if n > 0 {
		return ErrErased
	}
	return nil
}

// ErasurePurging lists the versions an unfinished erasure waits for: those
// of its uuids whose key is destroyed and whose bytes may remain.
func (c *Catalog) ErasurePurging(ctx context.Context, id ids.ID) ([]Version, error) {
	return c.versions(ctx, `SELECT `+versionCols+` FROM erased e
		CROSS JOIN versions v INDEXED BY versions_by_uuid ON v.tenant = e.tenant AND v.uuid = e.uuid
		WHERE e.erasure = ? AND e.held = 0 AND v.purge = ? ORDER BY v.id`, false, id[:], KeyDestroyed)
}

// RunningErasures lists the erasures not recorded done, oldest first.
func (c *Catalog) RunningErasures(ctx context.Context) ([]ids.ID, error) {
	return queryAll(ctx, c.db, "running erasures", scanID, `SELECT id FROM erasures INDEXED BY erasures_running WHERE done_at IS NULL ORDER BY id`)
}

// Erasure reads one erasure of a tenant with its totals, not its uuids
// (ErasedPage pages them); ErrNotFound when the tenant has none of that
// id.
func (c *Catalog) Erasure(ctx context.Context, tenant, id ids.ID) (Erasure, error) {
	e := Erasure{ID: id, Tenant: tenant}
	var req int64
	var done sql.NullInt64
	var errText, receipt, digest, reason sql.NullString
	var index sql.NullInt64
	err := c.db.QueryRowContext(ctx, `SELECT kind, actor, label, requested_at, unsearchable, done_at, error, receipt, not_found, digest,
			EXISTS (SELECT 1 FROM erase_todo WHERE erasure = erasures.id), audit_index, reason
		FROM erasures WHERE id = ? AND tenant = ?`, id[:], tenant[:]).Scan(&e.Kind, &e.Actor, &e.Label, &req, &e.Unsearchable, &done, &errText, &receipt,
		&e.NotFound, &digest, &e.Running, &index, &reason)
	if errors.Is(err, sql.ErrNoRows) {
		return e, ErrNotFound
	}
	if err != nil {
		return e, fmt.Errorf("catalog: read erasure: %w", err)
	}
	e.RequestedAt, e.DoneAt, e.Error, e.Receipt, e.Digest, e.Reason = fromNanos(req), nullTime(done), errText.String, receipt.String, digest.String, reason.String
	if index.Valid {
		i := uint64(index.Int64)
		e.AuditIndex = &i
	}
	err = c.db.QueryRowContext(ctx, `SELECT count(*) - coalesce(sum(held), 0), coalesce(sum(versions * (1 - held)), 0), coalesce(sum(held), 0) FROM erased WHERE erasure = ?`, id[:]).
		Scan(&e.Totals.Vcons, &e.Totals.Versions, &e.Totals.Held)
	if err != nil {
		return e, fmt.Errorf("catalog: read erasure: %w", err)
	}
	return e, nil
}

// The pages of an erasure's uuids (ErasedPage), by its primary key.
const (
	qErasedFirst = `SELECT uuid, versions, whole, held FROM erased WHERE erasure = ? ORDER BY uuid LIMIT ?`
	qErasedAfter = `SELECT uuid, versions, whole, held FROM erased WHERE erasure = ? AND uuid > ? ORDER BY uuid LIMIT ?`
)

// ErasedPage reads at most limit of an erasure's uuids after the uuid
// after (nil: from the first), in uuid order; more says whether any
// follow. An erasure's rows change no more once its batches are taken,
// so a page asked again is the same page.
func (c *Catalog) ErasedPage(ctx context.Context, id ids.ID, after *ids.ID, limit int) (items []Erased, more bool, err error) {
	q, args := qErasedFirst, []any{id[:], limit + 1}
	if after != nil {
		q, args = qErasedAfter, []any{id[:], after[:], limit + 1}
	}
	items, err = queryAll(ctx, c.db, "erasure", func(r row) (Erased, error) {
		var it Erased
		var u []byte
		if err := r.Scan(&u, &it.Versions, &it.Whole, &it.Held); err != nil {
			return it, err
		}
		it.UUID = ids.ID(u)
		return it, nil
	}, q, args...)
	if err != nil {
		return nil, false, err
	}
	if len(items) > limit {
		return items[:limit], true, nil
	}
	return items, false, nil
}

// ErasureTenant is the tenant of an erasure, for one the caller knows by
// id only (the finish at start).
func (c *Catalog) ErasureTenant(ctx context.Context, id ids.ID) (ids.ID, error) {
	var b []byte
	err := c.db.QueryRowContext(ctx, `SELECT tenant FROM erasures WHERE id = ?`, id[:]).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return ids.ID{}, ErrNotFound
	}
	return ids.ID(b), err
}

// FinishErasure records an erasure done with its receipt (and the digest
// of its lists, "" when the receipt lists them), and the audit record
// that counts it, once no batch of it waits and no version it took is
// left; false when it was recorded done already, or something still
// waits.
func (tx *Tx) FinishErasure(id ids.ID, doneAt time.Time, receipt, digest string, audit Record, tenant ids.ID) (bool, error) {
	res, err := tx.exec(`UPDATE erasures SET done_at = ?, receipt = ?, digest = ?, error = NULL WHERE id = ? AND done_at IS NULL
		AND NOT EXISTS (SELECT 1 FROM erase_todo WHERE erasure = ?)
		AND NOT EXISTS (SELECT 1 FROM erased e CROSS JOIN versions v INDEXED BY versions_by_uuid ON v.tenant = e.tenant AND v.uuid = e.uuid
			WHERE e.erasure = ? AND e.held = 0 AND v.purge = ?)`, nanos(doneAt), receipt, nullString(digest), id[:], id[:], id[:], KeyDestroyed)
	if err != nil {
		return false, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	if err := tx.Audit(tenant, audit); err != nil {
		return false, err
	}
	index, _ := tx.AuditIndex()
	_, err = tx.exec(`UPDATE erasures SET audit_index = ? WHERE id = ?`, int64(index), id[:])
	return true, err
}

// SetErasureError records why an erasure's purges wait ("" clears it).
func (c *Catalog) SetErasureError(ctx context.Context, id ids.ID, msg string) error {
	return c.Update(ctx, func(tx *Tx) error {
		_, err := tx.exec(`UPDATE erasures SET error = ? WHERE id = ? AND done_at IS NULL`, nullString(msg), id[:])
		return err
	})
}

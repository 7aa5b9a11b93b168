package catalog

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
)

// PackCandidate is a version a pack run may take: an object in the bucket.
type PackCandidate struct {
	ID         ids.ID
	StoredAt   time.Time
	SealedSize int64
}

// PackRow is a version's row in a pack file, as the catalog records it.
type PackRow struct {
	Version  ids.ID
	StoredAt time.Time
	Offset   int64
	Length   int64
	Purge    PurgeState
}

// MovedRow is where a version's sealed bytes lie in a new file.
type MovedRow struct {
	Version ids.ID
	Offset  int64
	Length  int64
}

// qOldestPackable finds a tenant's oldest object in the bucket from a
// time on: versions_by_location, from that time to the first that fits.
const qOldestPackable = `SELECT min(stored_at) FROM versions
	WHERE location = ? AND tenant = ? AND stored_at >= ? AND purge = 0 AND sealed_size <= ?`

// OldestPackable returns the stored time of the tenant's oldest version, at
// or after notBefore, that a pack run may take: an object in the bucket of
// at most limit sealed bytes whose purge has not started.
func (c *Catalog) OldestPackable(ctx context.Context, tenant ids.ID, limit int64, notBefore time.Time) (time.Time, bool, error) {
	var n sql.NullInt64
	err := c.db.QueryRowContext(ctx, qOldestPackable, string(InS3), tenant[:], nanos(notBefore), limit).Scan(&n)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("catalog: find objects to pack: %w", err)
	}
	if !n.Valid {
		return time.Time{}, false, nil
	}
	return fromNanos(n.Int64), true, nil
}

// PackCursor is where a pack run stands among a day's candidates: the
// stored time and id of the last one Packable listed. The zero value is
// the start.
type PackCursor struct {
	storedAt int64
	id       ids.ID
}

// qPackable pages through a tenant's objects in the bucket by stored time
// then id: versions_by_location, from the cursor to the day's end.
const qPackable = `SELECT id, stored_at, sealed_size FROM versions
	WHERE location = ? AND tenant = ? AND (stored_at, id) > (?, ?) AND stored_at < ? AND purge = 0 AND sealed_size <= ?
	ORDER BY stored_at, id LIMIT ?`

// Packable lists the versions after the cursor that a pack run may take
// among those stored in [from, to): at most maxRows, and no more once
// their sealed bytes reach maxBytes. It returns them in version order, as
// a pack file holds them, and the cursor of the next page.
func (c *Catalog) Packable(ctx context.Context, tenant ids.ID, from, to time.Time, limit int64, after PackCursor, maxBytes int64, maxRows int) ([]PackCandidate, PackCursor, error) {
	if after == (PackCursor{}) {
		after.storedAt = nanos(from) // (from, the zero id) is before every version stored from on
	}
	var out []PackCandidate
	var total int64
	err := eachRow(ctx, c.db, "objects to pack", func(r row) error {
		if total >= maxBytes {
			return errStop
		}
		var p PackCandidate
		var id []byte
		var stored int64
		if err := r.Scan(&id, &stored, &p.SealedSize); err != nil {
			return fmt.Errorf("catalog: read objects to pack: %w", err)
		}
		copy(p.ID[:], id)
		p.StoredAt = fromNanos(stored)
		after = PackCursor{storedAt: stored, id: p.ID}
		total += p.SealedSize
		out = append(out, p)
		return nil
	}, qPackable, string(InS3), tenant[:], after.storedAt, after.id[:], nanos(to), limit, maxRows)
	if err != nil {
		return nil, after, err
	}
	slices.SortFunc(out, func(a, b PackCandidate) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return out, after, nil
}

// PackRows lists the rows the catalog places in a pack file, in version
// order, purged or not.
func (c *Catalog) PackRows(ctx context.Context, file ids.ID) ([]PackRow, error) {
	return queryAll(ctx, c.db, "pack rows", func(r row) (PackRow, error) {
		var p PackRow
		var id []byte
		var stored int64
		if err := r.Scan(&id, &stored, &p.Offset, &p.Length, &p.Purge); err != nil {
			return p, fmt.Errorf("catalog: list pack rows: %w", err)
		}
		copy(p.Version[:], id)
		p.StoredAt = fromNanos(stored)
		return p, nil
	}, `SELECT id, stored_at, pack_offset, pack_length, purge FROM versions
		WHERE pack_file = ? ORDER BY id`, file[:])
}

// LivePacked returns up to limit ids, in order, of the tenant's live packed
// versions after the id after: current, not deleted, not purging. Callers
// page through them, so no read is held while they write (invariant 7).
func (c *Catalog) LivePacked(ctx context.Context, tenant ids.ID, after ids.ID, limit int) ([]ids.ID, error) {
	return queryAll(ctx, c.db, "live packed versions", scanID, qLivePacked, string(Packed), tenant[:], after[:], limit)
}

// qLivePacked pages through a tenant's packed versions by id: its range
// of versions_by_tenant, passing over those not packed (in a bucket that
// packs, the last days' and the large ones), each looked up in vcons
// (CROSS JOIN keeps versions the outer loop). INDEXED BY keeps SQLite
// from versions_by_location, which holds them in stored time order.
const qLivePacked = `SELECT v.id FROM versions v INDEXED BY versions_by_tenant
	CROSS JOIN vcons c ON c.tenant = v.tenant AND c.uuid = v.uuid AND c.current = v.id
	WHERE v.location = ? AND v.tenant = ? AND v.id > ? AND v.purge = 0 ORDER BY v.id LIMIT ?`

// IsPacked reports whether the version is packed: an object of it that
// remains is a copy a pack run left before it deleted it.
func (c *Catalog) IsPacked(ctx context.Context, id ids.ID) (bool, error) {
	var n int
	err := c.db.QueryRowContext(ctx, `SELECT count(*) FROM versions WHERE id = ? AND location = ?`, id[:], string(Packed)).Scan(&n)
	return n > 0, err
}

// CommitPack records a packed file: the file goes live and each version
// moves to its row. Every version must still be an object whose purge has
// not started, else nothing changes and ErrChanged is returned: the caller
// deletes the file (invariant 6).
func (tx *Tx) CommitPack(file ids.ID, bytes int64, rows []MovedRow) error {
	for _, r := range rows {
		res, err := tx.exec(`UPDATE versions SET location = ?, pack_file = ?, pack_offset = ?, pack_length = ?
			WHERE id = ? AND location = ? AND purge = 0 AND sealed_size = ?`,
			string(Packed), file[:], r.Offset, r.Length, r.Version[:], string(InS3), r.Length)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return ErrChanged
		}
	}
	return tx.makeLive(file, bytes, int64(len(rows)))
}

// moveRows moves each row from the file it names to file, refusing a row
// that moved or whose purge started meanwhile.
func (tx *Tx) moveRows(file ids.ID, from map[ids.ID]ids.ID, rows []MovedRow) error {
	for _, r := range rows {
		src, ok := from[r.Version]
		if !ok {
			return fmt.Errorf("catalog: moved row without a source file")
		}
		res, err := tx.exec(`UPDATE versions SET pack_file = ?, pack_offset = ?, pack_length = ?
			WHERE id = ? AND location = ? AND pack_file = ? AND purge = 0 AND pack_length = ?`,
			file[:], r.Offset, r.Length, r.Version[:], string(Packed), src[:], r.Length)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return ErrChanged
		}
	}
	return nil
}

func (tx *Tx) rowsIn(file ids.ID) (int, error) {
	var n int
	err := tx.queryRow(`SELECT count(*) FROM versions WHERE pack_file = ?`, file[:]).Scan(&n)
	return n, err
}

func (tx *Tx) fileState(file ids.ID) (PackState, error) {
	var s string
	err := tx.queryRow(`SELECT state FROM pack_files WHERE id = ?`, file[:]).Scan(&s)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrChanged
	}
	return PackState(s), err
}

// CommitMerge records a merge: the new file goes live with every row of
// the sources, and the sources are retired (kept for reader_grace). Each
// source must still be live and hold exactly the rows moved, none of them
// purging, else ErrChanged (invariant 6).
func (tx *Tx) CommitMerge(file ids.ID, bytes int64, from map[ids.ID]ids.ID, rows []MovedRow) error {
	sources := map[ids.ID]int{}
	for _, src := range from {
		sources[src]++
	}
	for src, want := range sources {
		st, err := tx.fileState(src)
		if err != nil {
			return err
		}
		n, err := tx.rowsIn(src)
		if err != nil {
			return err
		}
		if st != PackLive || n != want {
			return ErrChanged
		}
	}
	if err := tx.moveRows(file, from, rows); err != nil {
		return err
	}
	for src := range sources {
		if _, err := tx.exec(`UPDATE pack_files SET state = ?, retired_at = ? WHERE id = ?`, string(PackRetired), nanos(tx.now), src[:]); err != nil {
			return err
		}
	}
	return tx.makeLive(file, bytes, int64(len(rows)))
}

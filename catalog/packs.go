package catalog

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/ids"
)

// PackState is where a pack file is in its life (docs/FORMAT.md, "Pack
// files"). Only a live file is named by versions that can be read.
type PackState string

const (
	// PackPending is recorded before the file's PUT: a start that finds it
	// deletes the file, which no version names yet.
	PackPending PackState = "pending"
	// PackLive files hold the rows versions are read from.
	PackLive PackState = "live"
	// PackRetired files were merged away; they stay for reader_grace, for
	// readers on an older manifest.
	PackRetired PackState = "retired"
	// PackDeleting files were rewritten by a purge (or were retired when a
	// purge came); the purge is done once they are proven gone.
	PackDeleting PackState = "deleting"
)

// PackFile is one row of pack_files.
type PackFile struct {
	ID        ids.ID
	Tenant    ids.ID
	Date      string // yyyy-mm-dd, UTC, of its rows' stored_at
	Key       string // object key, without the store's prefix
	Bytes     int64
	Rows      int64
	State     PackState
	RetiredAt *time.Time
	CreatedAt time.Time
}

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

// Manifest is one manifest written to the bucket for a tenant.
type Manifest struct {
	Tenant    ids.ID
	Seq       int64
	Digest    []byte
	CreatedAt time.Time
}

const packFileCols = `id, tenant, date, object_key, bytes, rows, state, retired_at, created_at`

func scanPackFile(row interface{ Scan(...any) error }) (PackFile, error) {
	var f PackFile
	var id, tenant []byte
	var retired sql.NullInt64
	var created int64
	if err := row.Scan(&id, &tenant, &f.Date, &f.Key, &f.Bytes, &f.Rows, &f.State, &retired, &created); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return f, ErrNotFound
		}
		return f, fmt.Errorf("catalog: read pack file: %w", err)
	}
	copy(f.ID[:], id)
	copy(f.Tenant[:], tenant)
	f.RetiredAt = nullTime(retired)
	f.CreatedAt = fromNanos(created)
	return f, nil
}

func (c *Catalog) packFiles(ctx context.Context, q string, args ...any) ([]PackFile, error) {
	return queryAll(ctx, c, "pack files", scanPackFile, `SELECT `+packFileCols+` FROM pack_files `+q, args...)
}

func statesIn(states []PackState) (string, []any) {
	if len(states) == 0 {
		return "1", nil
	}
	args := make([]any, len(states))
	for i, s := range states {
		args[i] = string(s)
	}
	return "state IN (" + strings.TrimSuffix(strings.Repeat("?,", len(states)), ",") + ")", args
}

// PackFiles lists a tenant's pack files in the given states (every state
// when none is given), oldest date first, then in the order they were made.
// check compares them with what the bucket holds under parquet/.
func (c *Catalog) PackFiles(ctx context.Context, tenant ids.ID, states ...PackState) ([]PackFile, error) {
	cond, args := statesIn(states)
	return c.packFiles(ctx, `WHERE tenant = ? AND `+cond+` ORDER BY date, created_at, id`, append([]any{tenant[:]}, args...)...)
}

// PackFilesIn lists every tenant's pack files in the given states.
func (c *Catalog) PackFilesIn(ctx context.Context, states ...PackState) ([]PackFile, error) {
	cond, args := statesIn(states)
	return c.packFiles(ctx, `WHERE `+cond+` ORDER BY tenant, date, created_at, id`, args...)
}

// PackFileByID returns one pack file; ErrNotFound when no row has the id.
func (c *Catalog) PackFileByID(ctx context.Context, id ids.ID) (PackFile, error) {
	return scanPackFile(c.db.QueryRowContext(ctx, `SELECT `+packFileCols+` FROM pack_files WHERE id = ?`, id[:]))
}

// TenantsWithPackFiles lists the tenants that have a pack file or a
// manifest recorded, whatever its state: those whose manifest a start
// ensures.
func (c *Catalog) TenantsWithPackFiles(ctx context.Context) ([]ids.ID, error) {
	return c.idList(ctx, `SELECT tenant FROM pack_files UNION SELECT tenant FROM manifests ORDER BY 1`)
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
	rows, err := c.db.QueryContext(ctx, qPackable, string(InS3), tenant[:], after.storedAt, after.id[:], nanos(to), limit, maxRows)
	if err != nil {
		return nil, after, fmt.Errorf("catalog: list objects to pack: %w", err)
	}
	defer rows.Close()
	var out []PackCandidate
	var total int64
	for total < maxBytes && rows.Next() {
		var p PackCandidate
		var id []byte
		var stored int64
		if err := rows.Scan(&id, &stored, &p.SealedSize); err != nil {
			return nil, after, fmt.Errorf("catalog: list objects to pack: %w", err)
		}
		copy(p.ID[:], id)
		p.StoredAt = fromNanos(stored)
		after = PackCursor{storedAt: stored, id: p.ID}
		total += p.SealedSize
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, after, fmt.Errorf("catalog: list objects to pack: %w", err)
	}
	slices.SortFunc(out, func(a, b PackCandidate) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return out, after, nil
}

// PackRows lists the rows the catalog places in a pack file, in version
// order, purged or not.
func (c *Catalog) PackRows(ctx context.Context, file ids.ID) ([]PackRow, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT id, stored_at, pack_offset, pack_length, purge FROM versions
		WHERE pack_file = ? ORDER BY id`, file[:])
	if err != nil {
		return nil, fmt.Errorf("catalog: list pack rows: %w", err)
	}
	defer rows.Close()
	var out []PackRow
	for rows.Next() {
		var r PackRow
		var id []byte
		var stored int64
		if err := rows.Scan(&id, &stored, &r.Offset, &r.Length, &r.Purge); err != nil {
			return nil, fmt.Errorf("catalog: list pack rows: %w", err)
		}
		copy(r.Version[:], id)
		r.StoredAt = fromNanos(stored)
		out = append(out, r)
	}
	return out, rows.Err()
}

// FilesWithPurges lists the tenant's pack files that hold a row whose
// purge has started: a merge leaves them to the purge that rewrites them.
func (c *Catalog) FilesWithPurges(ctx context.Context, tenant ids.ID) (map[ids.ID]bool, error) {
	list, err := c.idList(ctx, `SELECT DISTINCT pack_file FROM versions
		WHERE tenant = ? AND location = ? AND purge <> 0 AND pack_file IS NOT NULL`, tenant[:], string(Packed))
	if err != nil {
		return nil, err
	}
	out := make(map[ids.ID]bool, len(list))
	for _, id := range list {
		out[id] = true
	}
	return out, nil
}

// LivePacked returns up to limit ids, in order, of the tenant's live packed
// versions after the id after: current, not deleted, not purging. Callers
// page through them, so no read is held while they write (invariant 7).
func (c *Catalog) LivePacked(ctx context.Context, tenant ids.ID, after ids.ID, limit int) ([]ids.ID, error) {
	return c.idList(ctx, qLivePacked, string(Packed), tenant[:], after[:], limit)
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

// AddPendingPack records a pack file before its PUT (docs/FORMAT.md, "Pack
// run"), so that a crash between the PUT and the commit leaves a row that
// start-up recovery finds.
func (tx *Tx) AddPendingPack(f PackFile) error {
	_, err := tx.exec(`INSERT INTO pack_files(id, tenant, date, object_key, bytes, rows, state, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, f.ID[:], f.Tenant[:], f.Date, f.Key, f.Bytes, f.Rows, string(PackPending), nanos(tx.now))
	return err
}

// RemovePendingPack forgets a pending file whose object is gone or was
// never written. A file in another state is left as it is.
func (tx *Tx) RemovePendingPack(id ids.ID) error {
	_, err := tx.exec(`DELETE FROM pack_files WHERE id = ? AND state = ?`, id[:], string(PackPending))
	return err
}

// makeLive turns a pending file live with its final size and row count.
func (tx *Tx) makeLive(file ids.ID, bytes, rows int64) error {
	res, err := tx.exec(`UPDATE pack_files SET state = ?, bytes = ?, rows = ? WHERE id = ? AND state = ?`,
		string(PackLive), bytes, rows, file[:], string(PackPending))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrChanged
	}
	return nil
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

// CommitRewrite records a purge's rewrite of old: the new file (nil when
// no row is left) goes live with the kept rows, old and every retired file
// of the tenant are to be deleted. old must still be live, its kept rows
// unpurged and its other rows exactly those purged; else ErrChanged, as
// when another purge started meanwhile (invariant 6).
func (tx *Tx) CommitRewrite(tenant, old ids.ID, file *ids.ID, bytes int64, kept []MovedRow, purged []ids.ID) error {
	st, err := tx.fileState(old)
	if err != nil {
		return err
	}
	if st != PackLive {
		return ErrChanged
	}
	for _, id := range purged {
		var n int
		if err := tx.queryRow(`SELECT count(*) FROM versions WHERE id = ? AND pack_file = ? AND purge <> 0`, id[:], old[:]).Scan(&n); err != nil {
			return err
		}
		if n != 1 {
			return ErrChanged
		}
	}
	n, err := tx.rowsIn(old)
	if err != nil {
		return err
	}
	if n != len(kept)+len(purged) {
		return ErrChanged
	}
	if file != nil {
		from := make(map[ids.ID]ids.ID, len(kept))
		for _, r := range kept {
			from[r.Version] = old
		}
		if err := tx.moveRows(*file, from, kept); err != nil {
			return err
		}
		if err := tx.makeLive(*file, bytes, int64(len(kept))); err != nil {
			return err
		}
	} else if len(kept) > 0 {
		return fmt.Errorf("catalog: a rewrite keeps rows but names no file")
	}
	if _, err := tx.exec(`UPDATE pack_files SET state = ? WHERE id = ?`, string(PackDeleting), old[:]); err != nil {
		return err
	}
	return tx.DeleteRetired(tenant)
}

// DeleteRetired marks every retired file of the tenant for deletion: a
// purge deletes them at once, since any of them may hold the purged row.
func (tx *Tx) DeleteRetired(tenant ids.ID) error {
	_, err := tx.exec(`UPDATE pack_files SET state = ? WHERE tenant = ? AND state = ?`, string(PackDeleting), tenant[:], string(PackRetired))
	return err
}

// PurgedIn lists the versions, purging, whose rows are in the given files.
func (c *Catalog) PurgedIn(ctx context.Context, files []ids.ID) ([]ids.ID, error) {
	var out []ids.ID
	for _, f := range files {
		list, err := c.idList(ctx, `SELECT id FROM versions WHERE pack_file = ? AND purge <> 0 ORDER BY id`, f[:])
		if err != nil {
			return nil, err
		}
		out = append(out, list...)
	}
	return out, nil
}

// FinishPackPurge ends a purge of packed rows once every deleted file,
// manifest and object is proven gone: it forgets the files and manifests
// and finishes the purge of each row the files held. A file that still
// holds an unpurged row is refused with ErrChanged.
func (tx *Tx) FinishPackPurge(tenant ids.ID, files []ids.ID, manifests []int64) error {
	for _, f := range files {
		var keep int
		if err := tx.queryRow(`SELECT count(*) FROM versions WHERE pack_file = ? AND purge = 0`, f[:]).Scan(&keep); err != nil {
			return err
		}
		if keep > 0 {
			return ErrChanged
		}
		rows, err := tx.query(`SELECT id FROM versions WHERE pack_file = ?`, f[:])
		if err != nil {
			return err
		}
		var purged []ids.ID
		for rows.Next() {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				rows.Close()
				return err
			}
			var id ids.ID
			copy(id[:], b)
			purged = append(purged, id)
		}
		rows.Close()
		for _, id := range purged {
			if err := tx.FinishPurge(id); err != nil {
				return err
			}
		}
		if _, err := tx.exec(`DELETE FROM pack_files WHERE id = ? AND state = ?`, f[:], string(PackDeleting)); err != nil {
			return err
		}
	}
	return tx.ForgetManifests(tenant, manifests)
}

// ForgetPackFile forgets a file in the given state once its object is
// deleted (a retired file past reader_grace). It refuses a file that a
// version still names.
func (tx *Tx) ForgetPackFile(id ids.ID, state PackState) error {
	n, err := tx.rowsIn(id)
	if err != nil {
		return err
	}
	if n > 0 {
		return ErrChanged
	}
	_, err = tx.exec(`DELETE FROM pack_files WHERE id = ? AND state = ?`, id[:], string(state))
	return err
}

// Manifests lists the tenant's recorded manifests by sequence number.
func (c *Catalog) Manifests(ctx context.Context, tenant ids.ID) ([]Manifest, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT seq, digest, created_at FROM manifests WHERE tenant = ? ORDER BY seq`, tenant[:])
	if err != nil {
		return nil, fmt.Errorf("catalog: list manifests: %w", err)
	}
	defer rows.Close()
	var out []Manifest
	for rows.Next() {
		m := Manifest{Tenant: tenant}
		var created int64
		if err := rows.Scan(&m.Seq, &m.Digest, &created); err != nil {
			return nil, fmt.Errorf("catalog: list manifests: %w", err)
		}
		m.CreatedAt = fromNanos(created)
		out = append(out, m)
	}
	return out, rows.Err()
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

package catalog

import (
	"context"
	"fmt"

	"github.com/vcon-server/vcon-server/internal/ids"
)

// FilesWithPurges lists the tenant's pack files that hold a row whose
// purge has started: a merge leaves them to the purge that rewrites them.
func (c *Catalog) FilesWithPurges(ctx context.Context, tenant ids.ID) (map[ids.ID]bool, error) {
	list, err := queryAll(ctx, c.db, "pack files with purges", scanID, `SELECT DISTINCT pack_file FROM versions
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

// PurgedIn lists the versions, purging, whose rows are in the given files.
func (c *Catalog) PurgedIn(ctx context.Context, files []ids.ID) ([]ids.ID, error) {
	var out []ids.ID
	for _, f := range files {
		list, err := queryAll(ctx, c.db, "purged rows", scanID, `SELECT id FROM versions WHERE pack_file = ? AND purge <> 0 ORDER BY id`, f[:])
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
		// Read whole before FinishPurge deletes them: SQLite leaves
		// undefined what a read still open sees of the rows its
		// transaction changes.
		purged, err := queryAll(tx.ctx, tx.tx, "a pack file's rows", scanID, `SELECT id FROM versions WHERE pack_file = ?`, f[:])
		if err != nil {
			return err
		}
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

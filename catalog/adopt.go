package catalog

import "github.com/vcon-server/vcon-server/ids"

// AdoptPackFile records f, a pack file the bucket holds that a restored
// catalog did not name live, as live, and points each row at it: the
// versions whose bytes it holds and that have none elsewhere
// (docs/FORMAT.md, "Restore"). A row whose purge started, or whose sealed
// size differs from its length in f, is left as it is. It returns how many
// rows moved.
func (tx *Tx) AdoptPackFile(f PackFile, rows []MovedRow) (int, error) {
	_, err := tx.exec(`INSERT INTO pack_files(id, tenant, date, object_key, bytes, rows, state, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(id) DO UPDATE SET state = excluded.state, bytes = excluded.bytes, rows = excluded.rows, retired_at = NULL`,
		f.ID[:], f.Tenant[:], f.Date, f.Key, f.Bytes, f.Rows, string(PackLive), nanos(tx.now))
	if err != nil {
		return 0, err
	}
	moved := 0
	for _, r := range rows {
		res, err := tx.exec(`UPDATE versions SET location = ?, pack_file = ?, pack_offset = ?, pack_length = ?
			WHERE id = ? AND tenant = ? AND purge = 0 AND sealed_size = ?`,
			string(Packed), f.ID[:], r.Offset, r.Length, r.Version[:], f.Tenant[:], r.Length)
		if err != nil {
			return moved, err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			moved++
		}
	}
	return moved, nil
}

// LoseRows unpoints the kept rows of file, a pack file gone from the
// bucket whose rows no other file holds: their bytes are nowhere, so they
// read as damaged, and a purge of another row of file can finish.
func (tx *Tx) LoseRows(file ids.ID) error {
	_, err := tx.exec(`UPDATE versions SET pack_file = NULL, pack_offset = NULL, pack_length = NULL
		WHERE pack_file = ? AND purge = 0`, file[:])
	return err
}

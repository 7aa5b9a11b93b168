package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
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

const packFileCols = `id, tenant, date, object_key, bytes, rows, state, retired_at, created_at`

func scanPackFile(r row) (PackFile, error) {
	var f PackFile
	var id, tenant []byte
	var retired sql.NullInt64
	var created int64
	if err := r.Scan(&id, &tenant, &f.Date, &f.Key, &f.Bytes, &f.Rows, &f.State, &retired, &created); err != nil {
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
	return queryAll(ctx, c.db, "pack files", scanPackFile, `SELECT `+packFileCols+` FROM pack_files `+q, args...)
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
	return queryAll(ctx, c.db, "tenants with pack files", scanID, `SELECT tenant FROM pack_files UNION SELECT tenant FROM manifests ORDER BY 1`)
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

// DeleteRetired marks every retired file of the tenant for deletion: a
// purge deletes them at once, since any of them may hold the purged row.
func (tx *Tx) DeleteRetired(tenant ids.ID) error {
	_, err := tx.exec(`UPDATE pack_files SET state = ? WHERE tenant = ? AND state = ?`, string(PackDeleting), tenant[:], string(PackRetired))
	return err
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

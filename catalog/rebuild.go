package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
)

// A catalog rebuilt from its replica (docs/FORMAT.md, "Restore"): the
// tables of the replica's schema filled with its rows, then its indexes,
// checked whole before anything opens it.

// Loader fills a catalog being rebuilt from a replica.
type Loader struct {
	ctx   context.Context
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
}

// Put writes row (values for cols) into table, replacing the row with
// the same key.
func (l *Loader) Put(table string, cols []string, row []any) error {
	q := fmt.Sprintf(`INSERT OR REPLACE INTO %s(%s) VALUES (%s)`, quoteIdent(table), colList(cols), strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", "))
	return l.exec(q, row)
}

// Delete removes the row of table whose key columns hold key.
func (l *Loader) Delete(table string, keyCols []string, key []any) error {
	where := make([]string, len(keyCols))
	for i, k := range keyCols {
		where[i] = colList([]string{k}) + " = ?"
	}
	return l.exec(fmt.Sprintf(`DELETE FROM %s WHERE %s`, quoteIdent(table), strings.Join(where, " AND ")), key)
}

func (l *Loader) exec(q string, args []any) error {
	st, ok := l.stmts[q]
	if !ok {
		var err error
		if st, err = l.tx.PrepareContext(l.ctx, q); err != nil {
			return fmt.Errorf("catalog: restore: %w", err)
		}
		l.stmts[q] = st
	}
	if _, err := st.ExecContext(l.ctx, args...); err != nil {
		return fmt.Errorf("catalog: restore: %w", err)
	}
	return nil
}

// Build writes a new catalog file at path (which must not exist) from a
// replica: the tables of schema, the rows fill puts, then the indexes. The
// search indexes are left to be rebuilt (tokens are not carried), and the
// file is checked whole and synced before Build returns.
func Build(ctx context.Context, path string, schema []SchemaItem, fill func(*Loader) error) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("catalog: %s already exists", path)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	f.Close()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(0)&_pragma=journal_mode(DELETE)&_pragma=synchronous(FULL)")
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("catalog: restore: %w", err)
	}
	defer tx.Rollback()
	for _, it := range schema {
		if it.Type == "table" {
			if _, err := tx.ExecContext(ctx, it.SQL); err != nil {
				return fmt.Errorf("catalog: restore table %s: %w", it.Name, err)
			}
		}
	}
	l := &Loader{ctx: ctx, tx: tx, stmts: map[string]*sql.Stmt{}}
	if err := fill(l); err != nil {
		return err
	}
	for _, st := range l.stmts {
		st.Close()
	}
	for _, it := range schema {
		if it.Type == "index" {
			if _, err := tx.ExecContext(ctx, it.SQL); err != nil {
				return fmt.Errorf("catalog: restore index %s: %w", it.Name, err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM search_tokens; UPDATE tenants SET search_cursor = NULL, search_built = 0, search_key_check = NULL`); err != nil {
		return fmt.Errorf("catalog: restore: reset the search indexes: %w", err)
	}
	// The mark start-up recovery reads: every tombstone and every pack
	// file is looked at once (docs/FORMAT.md, "Restore").
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO meta(key, value) VALUES ('restored', X'01')`); err != nil {
		return fmt.Errorf("catalog: restore: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("catalog: restore: %w", err)
	}
	var ok string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		return fmt.Errorf("catalog: restore: the rebuilt catalog fails SQLite's integrity check: %v%s", err, ok)
	}
	var fk int
	rows, err := db.QueryContext(ctx, `PRAGMA foreign_key_check`)
	if err == nil {
		for rows.Next() {
			fk++
		}
		rows.Close()
	}
	if fk > 0 {
		return fmt.Errorf("catalog: restore: the rebuilt catalog has %d row(s) that name a missing row", fk)
	}
	if err := db.Close(); err != nil {
		return err
	}
	if f, err = os.Open(path); err == nil {
		err = f.Sync()
		f.Close()
	}
	return err
}

// FileKeyCheck reads the master key check value of the catalog file at
// path without opening it for writing (a restore's last check).
func FileKeyCheck(ctx context.Context, path string) ([]byte, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var check []byte
	if err := db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'key_check'`).Scan(&check); err != nil {
		return nil, fmt.Errorf("catalog: read the key check of %s: %w", path, err)
	}
	return check, nil
}

// Restored reports whether the catalog was rebuilt by a restore whose
// start-up recovery has not finished yet.
func (c *Catalog) Restored(ctx context.Context) (bool, error) {
	_, err := c.Meta(ctx, "restored")
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// ClearRestored drops the mark Restored reads.
func (tx *Tx) ClearRestored() error {
	_, err := tx.exec(`DELETE FROM meta WHERE key = 'restored'`)
	return err
}

package catalog

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
)

// View is one consistent read of the catalog: every call sees the same
// commit, whatever other connections write meanwhile.
type View struct {
	ctx   context.Context
	conn  *sql.Conn
	stmts map[string]*sql.Stmt // a segment reads many rows of few tables: each query is parsed once
}

// query runs q through a statement prepared once for the view.
func (v *View) query(q string, args ...any) (*sql.Rows, error) {
	st, ok := v.stmts[q]
	if !ok {
		var err error
		if st, err = v.conn.PrepareContext(v.ctx, q); err != nil {
			return nil, err
		}
		v.stmts[q] = st
	}
	return st.QueryContext(v.ctx, args...)
}

// Read runs fn in a read transaction. While it lasts, a checkpoint waits
// (a purge's checkpoint included), so fn should not dawdle.
func (c *Catalog) Read(ctx context.Context, fn func(*View) error) error {
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN DEFERRED`); err != nil {
		return fmt.Errorf("catalog: begin a read: %w", err)
	}
	defer conn.ExecContext(context.Background(), `ROLLBACK`)
	v := &View{ctx: ctx, conn: conn, stmts: map[string]*sql.Stmt{}}
	defer func() {
		for _, st := range v.stmts {
			st.Close()
		}
	}()
	// The first read fixes the snapshot every later read sees.
	if _, err := v.LastChange(); err != nil {
		return err
	}
	return fn(v)
}

// LastChange is LastChange as of the view.
func (v *View) LastChange() (int64, error) { return lastChange(v.ctx, v.conn) }

// Tables lists the carried tables.
func (v *View) Tables() ([]RepTable, error) { return repTables(v.ctx, v.conn) }

// Schema returns every table and index, in the order they were made, and
// its fingerprint; the replica's own tables and triggers are left out of
// the fingerprint only.
func (v *View) Schema() ([]SchemaItem, string, error) { return readSchema(v.ctx, v.conn) }

func readSchema(ctx context.Context, q querier) ([]SchemaItem, string, error) {
	rows, err := q.QueryContext(ctx, `SELECT type, name, sql FROM sqlite_master WHERE type IN ('table', 'index') AND sql IS NOT NULL AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY rowid`)
	if err != nil {
		return nil, "", fmt.Errorf("catalog: read the schema: %w", err)
	}
	defer rows.Close()
	var out []SchemaItem
	h := sha256.New()
	for rows.Next() {
		var it SchemaItem
		if err := rows.Scan(&it.Type, &it.Name, &it.SQL); err != nil {
			return nil, "", err
		}
		out = append(out, it)
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00", it.Type, it.Name, it.SQL)
	}
	return out, hex.EncodeToString(h.Sum(nil)[:16]), rows.Err()
}

// Changes calls fn once with the table and key of every row the log notes
// after after, up to and including upto, in no particular order: what a
// reader needs is each row's value as of the view, not its history.
func (v *View) Changes(after, upto int64, fn func(table string, key []any) error) error {
	rows, err := v.conn.QueryContext(v.ctx, `SELECT DISTINCT tbl, k1, k2, k3, k4 FROM replica_log WHERE seq > ? AND seq <= ?`, after, upto)
	if err != nil {
		return fmt.Errorf("catalog: read the change log: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var t string
		k := make([]any, maxKeyCols)
		if err := rows.Scan(&t, &k[0], &k[1], &k[2], &k[3]); err != nil {
			return err
		}
		if err := fn(t, k); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Row reads the row of t named by key (the first len(t.Key) values are
// used); nil when there is none.
func (v *View) Row(t RepTable, key []any) ([]any, error) {
	kc := t.keyCols()
	where := make([]string, len(kc))
	for i, k := range kc {
		where[i] = colList([]string{k}) + " = ?"
	}
	q := fmt.Sprintf(`SELECT %s FROM %s WHERE %s`, colList(t.Cols), quoteIdent(t.Name), strings.Join(where, " AND "))
	rows, err := v.query(q, key[:len(kc)]...)
	if err != nil {
		return nil, fmt.Errorf("catalog: read a row of %s: %w", t.Name, err)
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err()
	}
	return scanRow(rows, len(t.Cols))
}

// Range calls fn with every row of t whose key is at least lo and below
// hi, in key order; a nil bound is open.
func (v *View) Range(t RepTable, lo, hi []any, fn func(row []any) error) error {
	keys := colList(t.keyCols())
	var where []string
	var args []any
	bound := func(op string, b []any) {
		marks := strings.TrimSuffix(strings.Repeat("?, ", len(b)), ", ")
		where = append(where, fmt.Sprintf("(%s) %s (%s)", keys, op, marks))
		args = append(args, b...)
	}
	if lo != nil {
		bound(">=", lo)
	}
	if hi != nil {
		bound("<", hi)
	}
	q := fmt.Sprintf(`SELECT %s FROM %s`, colList(t.Cols), quoteIdent(t.Name))
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY " + keys
	rows, err := v.conn.QueryContext(v.ctx, q, args...)
	if err != nil {
		return fmt.Errorf("catalog: read rows of %s: %w", t.Name, err)
	}
	defer rows.Close()
	for rows.Next() {
		row, err := scanRow(rows, len(t.Cols))
		if err != nil {
			return err
		}
		if err := fn(row); err != nil {
			return err
		}
	}
	return rows.Err()
}

func scanRow(rows *sql.Rows, n int) ([]any, error) {
	row := make([]any, n)
	ptrs := make([]any, n)
	for i := range row {
		ptrs[i] = &row[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	return row, nil
}

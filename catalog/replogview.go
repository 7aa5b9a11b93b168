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
	ctx      context.Context
	tx       *sql.Tx
	prepared prepared
}

// prepared runs each query of a segment's reads through the catalog's
// statement cache (stmts.go): a segment is cut for every few writes with
// max_lag = 0, and parsing its queries anew each time was a fifth of a
// write's CPU. A statement serves one open result at a time on a
// connection: no query a view runs this way is open twice at once (the
// change log's stays open while each row's is read, never its own).
type prepared struct {
	c     *Catalog
	tx    *sql.Tx
	stmts map[string]*sql.Stmt // the transaction's copies, by query
}

func (p prepared) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, ok := p.stmts[q]
	if !ok {
		// As a write transaction's: a query not prepared yet runs
		// unprepared while the cache prepares it beside, since a read
		// holding its connection must not wait for another.
		s := p.c.txStmt(q)
		if s == nil {
			return p.tx.QueryContext(ctx, q, args...)
		}
		st = p.tx.StmtContext(ctx, s)
		p.stmts[q] = st
	}
	return st.QueryContext(ctx, args...)
}

func (p prepared) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if s := p.c.txStmt(q); s != nil {
		return p.tx.StmtContext(ctx, s).QueryRowContext(ctx, args...)
	}
	return p.tx.QueryRowContext(ctx, q, args...)
}

// Read runs fn in a read transaction. While it lasts, a checkpoint waits
// (a purge's checkpoint included), so fn should not dawdle.
func (c *Catalog) Read(ctx context.Context, fn func(*View) error) error {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("catalog: begin a read: %w", err)
	}
	// A read transaction changes nothing: its end is a rollback, whose
	// statements database/sql closes.
	defer tx.Rollback()
	v := &View{ctx: ctx, tx: tx, prepared: prepared{c, tx, map[string]*sql.Stmt{}}}
	// The first read fixes the snapshot every later read sees.
	if _, err := v.LastChange(); err != nil {
		return err
	}
	return fn(v)
}

// LastChange is LastChange as of the view.
func (v *View) LastChange() (int64, error) { return lastChange(v.ctx, v.prepared) }

// Tables lists the carried tables.
func (v *View) Tables() ([]RepTable, error) { return repTables(v.ctx, v.tx) }

// Schema returns every table and index, in the order they were made, and
// its fingerprint; the replica's own tables and triggers are left out of
// the fingerprint only.
func (v *View) Schema() ([]SchemaItem, string, error) { return readSchema(v.ctx, v.tx) }

func readSchema(ctx context.Context, q querier) ([]SchemaItem, string, error) {
	var out []SchemaItem
	h := sha256.New()
	err := eachRow(ctx, q, "the schema", func(r row) error {
		var it SchemaItem
		if err := r.Scan(&it.Type, &it.Name, &it.SQL); err != nil {
			return err
		}
		out = append(out, it)
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00", it.Type, it.Name, it.SQL)
		return nil
	}, `SELECT type, name, sql FROM sqlite_master WHERE type IN ('table', 'index') AND sql IS NOT NULL AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY rowid`)
	if err != nil {
		return nil, "", err
	}
	return out, hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// Changes calls fn once with the table and key of every row the log notes
// after after, up to and including upto, in no particular order: what a
// reader needs is each row's value as of the view, not its history.
func (v *View) Changes(after, upto int64, fn func(table string, key []any) error) error {
	return eachRow(v.ctx, v.prepared, "the change log", func(r row) error {
		var t string
		k := make([]any, maxKeyCols)
		if err := r.Scan(&t, &k[0], &k[1], &k[2], &k[3]); err != nil {
			return err
		}
		return fn(t, k)
	}, `SELECT DISTINCT tbl, k1, k2, k3, k4 FROM replica_log WHERE seq > ? AND seq <= ?`, after, upto)
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
	var out []any
	err := eachRow(v.ctx, v.prepared, "a row of "+t.Name, func(r row) error {
		var err error
		if out, err = scanRow(r, len(t.Cols)); err != nil {
			return err
		}
		return errStop
	}, q, key[:len(kc)]...)
	return out, err
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
	return eachRow(v.ctx, v.tx, "rows of "+t.Name, func(r row) error {
		vals, err := scanRow(r, len(t.Cols))
		if err != nil {
			return err
		}
		return fn(vals)
	}, q, args...)
}

// scanRow reads a row of n columns as the driver gives them.
func scanRow(r row, n int) ([]any, error) {
	vals := make([]any, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := r.Scan(ptrs...); err != nil {
		return nil, err
	}
	return vals, nil
}

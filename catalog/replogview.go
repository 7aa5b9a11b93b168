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
// connection: a view reads each query's rows to their end before it
// runs the same query again.
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
	// Read-only, so a plain BEGIN: the pool's writes begin IMMEDIATE
	// (dsn), which would queue a segment's read behind the writer.
	tx, err := c.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
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

// ChangedTables names the tables of the rows the log notes after after,
// up to and including upto.
func (v *View) ChangedTables(after, upto int64) (map[string]bool, error) {
	out := map[string]bool{}
	err := eachRow(v.ctx, v.prepared, "the change log", func(r row) error {
		var t string
		if err := r.Scan(&t); err != nil {
			return err
		}
		out[t] = true
		return nil
	}, `SELECT DISTINCT tbl FROM replica_log WHERE seq > ? AND seq <= ?`, after, upto)
	return out, err
}

// ChangedRows calls fn once with the key and the row as of the view (nil:
// gone) of every row of t the log notes after after, up to and including
// upto, in no particular order. One query joins the log's keys to the
// table: a segment reads its rows table by table, not one query a row.
func (v *View) ChangedRows(t RepTable, after, upto int64, fn func(key, row []any) error) error {
	nk := len(t.Key)
	n := nk + len(t.Cols) + 1
	return eachRow(v.ctx, v.prepared, "the changed rows of "+t.Name, func(r row) error {
		vals, err := scanRow(r, n)
		if err != nil {
			return err
		}
		key, row := vals[:nk], vals[nk:n-1]
		if gone, _ := vals[n-1].(int64); gone == 1 {
			row = nil
		}
		return fn(key, row)
	}, changedRowsQuery(t), t.Name, after, upto)
}

// changedRowsQuery is ChangedRows' query of t: the log's distinct keys
// of t in a range of change numbers, each with the row it names, if any.
func changedRowsQuery(t RepTable) string {
	kc := t.keyCols()
	keys := make([]string, len(kc))
	on := make([]string, len(kc))
	for i, k := range kc {
		keys[i] = fmt.Sprintf("k%d", i+1)
		on[i] = "t." + colList([]string{k}) + " = l." + keys[i]
	}
	cols := make([]string, len(t.Cols))
	for i, c := range t.Cols {
		cols[i] = "t." + colList([]string{c})
	}
	// A key column is never NULL in a row that is there (a primary key
	// of a WITHOUT ROWID table, an INTEGER PRIMARY KEY or the rowid).
	return fmt.Sprintf(`SELECT l.%s, %s, t.%s IS NULL FROM (SELECT DISTINCT %s FROM replica_log WHERE tbl = ? AND seq > ? AND seq <= ?) l LEFT JOIN %s t ON %s`,
		strings.Join(keys, ", l."), strings.Join(cols, ", "), colList(kc[:1]), strings.Join(keys, ", "), quoteIdent(t.Name), strings.Join(on, " AND "))
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

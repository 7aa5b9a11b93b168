package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/vcon-server/vcon-server/internal/ids"
)

// pageSize bounds how many rows one short read returns: long scans page
// through the catalog, holding no read transaction across the I/O between
// pages (invariant 7), and never a whole tenant in memory. Each page is a
// range of an index read in the order it pages, from the cursor on
// (docs/FORMAT.md, "Indexes"), so a scan costs the rows it returns
// whatever the catalog holds; catalog/plans_test.go checks every paged
// query's plan.
const pageSize = 1000

// row is one row of a result: a *sql.Row, or the row eachRow is at.
type row interface{ Scan(...any) error }

// querier runs a query: the pool for a short read, a write transaction's
// *sql.Tx, a view's connection.
type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// errStop ends eachRow early and without an error: fn returns it once it
// has what it needs.
var errStop = errors.New("catalog: stop reading rows")

// eachRow runs query and calls fn with each row, in the result's order,
// until fn returns an error, which it returns as it is; what names the
// rows in the errors of the query and of the result. The rows are closed
// when it returns, so a transaction that changes the rows it reads
// collects them in fn and writes after: SQLite leaves undefined what a
// read still open sees of its own connection's changes.
func eachRow(ctx context.Context, q querier, what string, fn func(row) error, query string, args ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("catalog: read %s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			if err == errStop {
				return nil
			}
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("catalog: read %s: %w", what, err)
	}
	return nil
}

// queryAll runs query and turns each row into a T with scan, in order;
// what names the rows in errors.
func queryAll[T any](ctx context.Context, q querier, what string, scan func(row) (T, error), query string, args ...any) ([]T, error) {
	var out []T
	err := eachRow(ctx, q, what, func(r row) error {
		v, err := scan(r)
		if err != nil {
			return err
		}
		out = append(out, v)
		return nil
	}, query, args...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanID reads a row of one id, for queryAll.
func scanID(r row) (ids.ID, error) {
	var b []byte
	var id ids.ID
	err := r.Scan(&b)
	copy(id[:], b)
	return id, err
}

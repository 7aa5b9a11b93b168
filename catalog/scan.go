package catalog

import (
	"context"
	"database/sql"
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

// queryAll runs q and turns each row into a T with scan; what names the
// list in an error.
func queryAll[T any](ctx context.Context, c *Catalog, what string, scan func(interface{ Scan(...any) error }) (T, error), q string, args ...any) ([]T, error) {
	rows, err := c.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("catalog: list %s: %w", what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// idList reads a one-column result of ids.
func (c *Catalog) idList(ctx context.Context, q string, args ...any) ([]ids.ID, error) {
	return queryAll(ctx, c, "ids", scanID, q, args...)
}

// scanIDs reads a one-column result of ids, and closes it.
func scanIDs(rows *sql.Rows) ([]ids.ID, error) {
	defer rows.Close()
	var out []ids.ID
	for rows.Next() {
		id, err := scanID(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

func scanID(row interface{ Scan(...any) error }) (ids.ID, error) {
	var b []byte
	var id ids.ID
	err := row.Scan(&b)
	copy(id[:], b)
	return id, err
}

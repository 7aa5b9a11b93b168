package catalog

import (
	"context"
	"fmt"
	"math"

	"github.com/vcon-server/vcon-server/ids"
)

// pageSize bounds how many rows one short read returns: long scans page
// through the catalog, holding no read transaction across the I/O between
// pages (invariant 7), and never a whole tenant in memory. Each page is a
// range of an index read in the order it pages, from the cursor on
// (docs/FORMAT.md, "Indexes"), so a scan costs the rows it returns
// whatever the catalog holds; catalog/plans_test.go checks every paged
// query's plan.
const pageSize = 1000

// qKept pages through a tenant's kept versions by id: versions_by_tenant.
const qKept = `SELECT ` + versionCols + ` FROM versions v
	WHERE v.tenant = ? AND v.id > ? AND v.purge = 0 ORDER BY v.id LIMIT ?`

// EachKept calls fn for every kept version (purge not started) of a
// tenant, in version id order.
func (c *Catalog) EachKept(ctx context.Context, tenant ids.ID, fn func(Version) error) error {
	return c.each(ctx, qKept, func(last *Version) []any {
		var after ids.ID
		if last != nil {
			after = last.ID
		}
		return []any{tenant[:], after[:]}
	}, fn)
}

// KeptPage returns up to limit kept versions of a tenant after the given
// version id, in id order.
func (c *Catalog) KeptPage(ctx context.Context, tenant, after ids.ID, limit int) ([]Version, error) {
	return c.page(ctx, qKept, []any{tenant[:], after[:], limit})
}

// qAt pages through the versions at a location by tenant, then stored
// time and id: versions_by_location, the index a pack run reads.
const qAt = `SELECT ` + versionCols + ` FROM versions v
	WHERE v.location = ? AND (v.tenant, v.stored_at, v.id) > (?, ?, ?) ORDER BY v.tenant, v.stored_at, v.id LIMIT ?`

// EachAt calls fn for every version at a location, tenant by tenant, each
// tenant's in stored time order (then version id).
func (c *Catalog) EachAt(ctx context.Context, loc Location, fn func(Version) error) error {
	return c.each(ctx, qAt, func(last *Version) []any {
		var tenant, after ids.ID
		stored := int64(math.MinInt64)
		if last != nil {
			tenant, stored, after = last.Tenant, nanos(last.StoredAt), last.ID
		}
		return []any{string(loc), tenant[:], stored, after[:]}
	}, fn)
}

// each calls fn for every row of q, a page at a time: q's arguments are
// cursor's for the page after last (nil before the first page), then the
// page size.
func (c *Catalog) each(ctx context.Context, q string, cursor func(last *Version) []any, fn func(Version) error) error {
	var last *Version
	for {
		page, err := c.page(ctx, q, append(cursor(last), pageSize))
		if err != nil {
			return err
		}
		for _, v := range page {
			if err := fn(v); err != nil {
				return err
			}
		}
		if len(page) < pageSize {
			return nil
		}
		last = &page[len(page)-1]
	}
}

func (c *Catalog) page(ctx context.Context, q string, args []any) ([]Version, error) {
	return c.versions(ctx, q, false, args...)
}

// versions runs q, whose columns are versionCols and, withCurrent, one
// more saying whether the row is its vCon's current version.
func (c *Catalog) versions(ctx context.Context, q string, withCurrent bool, args ...any) ([]Version, error) {
	rows, err := c.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("catalog: read versions: %w", err)
	}
	defer rows.Close()
	var out []Version
	for rows.Next() {
		var cur bool
		var extra []any
		if withCurrent {
			extra = append(extra, &cur)
		}
		v, err := scanVersion(rows, extra...)
		if err != nil {
			return nil, err
		}
		v.Current = cur
		out = append(out, v)
	}
	return out, rows.Err()
}

// MoveVersion records that a version's object moved between locations;
// ErrChanged when it was no longer where the mover found it.
func (tx *Tx) MoveVersion(id ids.ID, from, to Location) error {
	res, err := tx.exec(`UPDATE versions SET location = ? WHERE id = ? AND location = ?`, string(to), id[:], string(from))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrChanged
	}
	return nil
}

// CountPurging counts versions whose purge was cut off after the key.
func (c *Catalog) CountPurging(ctx context.Context, tenant ids.ID) (int, error) {
	var n int
	err := c.db.QueryRowContext(ctx, `SELECT count(*) FROM versions WHERE tenant = ? AND purge <> 0`, tenant[:]).Scan(&n)
	return n, err
}

// CountKept counts every tenant's kept versions.
func (c *Catalog) CountKept(ctx context.Context) (int, error) {
	var n int
	err := c.db.QueryRowContext(ctx, `SELECT count(*) FROM versions WHERE purge = 0`).Scan(&n)
	return n, err
}

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

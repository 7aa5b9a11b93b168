package catalog

import (
	"context"
	"fmt"
	"time"

	"github.com/vcon-server/vcon-server/ids"
)

// The counts of the progress lines: how many items a long command will
// work through (check counts with CountKept). Each is one short read that
// an index answers, taken once before the work starts; the work may then
// find a few more or fewer.

const qCountAt = `SELECT count(*) FROM versions WHERE location = ?`

// CountAt counts the versions at a location, those EachAt calls fn for.
func (c *Catalog) CountAt(ctx context.Context, loc Location) (int, error) {
	var n int
	if err := c.db.QueryRowContext(ctx, qCountAt, string(loc)).Scan(&n); err != nil {
		return 0, fmt.Errorf("catalog: count versions at %s: %w", loc, err)
	}
	return n, nil
}

const qCountWrappedKeys = `SELECT (SELECT count(*) FROM versions) -
	(SELECT count(*) FROM versions WHERE purge <> 0 AND wrapped_key IS NULL)`

// CountWrappedKeys counts the data keys RotateKeys re-wraps. A key is
// removed only as its version's purge is marked KeyDestroyed, in the same
// statement, so the count is every version less the purging ones without
// a key: two index counts, where wrapped_key IS NOT NULL reads every row.
func (c *Catalog) CountWrappedKeys(ctx context.Context) (int, error) {
	var n int
	err := c.db.QueryRowContext(ctx, qCountWrappedKeys).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("catalog: count data keys: %w", err)
	}
	return n, nil
}

// The + keeps the purging count on versions_purging: on a tenant index it
// would read every row of the tenant for its purge column.
const qCountExport = `SELECT
	(SELECT count(*) FROM versions WHERE tenant = ? AND stored_at >= ? AND stored_at < ?) -
	(SELECT count(*) FROM versions WHERE purge <> 0 AND +tenant = ? AND stored_at >= ? AND stored_at < ?)`

// CountExport counts the tenant's kept versions stored at or after since
// and before until (zero times: no bound), those ExportPage lists: the
// tenant's versions in the window less its purging ones in it, two index
// counts.
func (c *Catalog) CountExport(ctx context.Context, tenant ids.ID, since, until time.Time) (int, error) {
	lo, hi := int64(-1<<63), int64(1<<63-1)
	if !since.IsZero() {
		lo = nanos(since)
	}
	if !until.IsZero() {
		hi = nanos(until)
	}
	var n int
	err := c.db.QueryRowContext(ctx, qCountExport, tenant[:], lo, hi, tenant[:], lo, hi).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("catalog: count versions to export: %w", err)
	}
	return n, nil
}

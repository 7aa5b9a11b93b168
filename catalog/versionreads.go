package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
)

// Version reads: one vCon's versions, the scans that page through a
// tenant's or a location's, the export's pages and the progress counts. Each
// is a short read outside any write; catalog/plans_test.go holds their
// plans.

// HasCurrent reports whether the vCon has a current version.
func (c *Catalog) HasCurrent(ctx context.Context, tenant, uuid ids.ID) (bool, error) {
	var n int
	err := c.queryRow(ctx, `SELECT count(*) FROM vcons WHERE tenant = ? AND uuid = ? AND current IS NOT NULL`, tenant[:], uuid[:]).Scan(&n)
	return n > 0, err
}

// Current returns the current version of a vCon; ErrNotFound when it has
// none (never stored, deleted, or another tenant's).
func (c *Catalog) Current(ctx context.Context, tenant, uuid ids.ID) (Version, error) {
	v, err := scanVersion(c.queryRow(ctx, `SELECT `+versionCols+` FROM vcons c JOIN versions v ON v.id = c.current
		WHERE c.tenant = ? AND c.uuid = ? AND v.purge = 0`, tenant[:], uuid[:]))
	v.Current = err == nil
	return v, err
}

// Version returns one version by id, whatever its state.
func (c *Catalog) Version(ctx context.Context, id ids.ID) (Version, error) {
	return scanVersion(c.queryRow(ctx, `SELECT `+versionCols+` FROM versions v WHERE v.id = ?`, id[:]))
}

// qVersions reads a vCon's versions, newest first: its range of
// versions_by_uuid, in id order (CROSS JOIN keeps versions the outer
// loop: SQLite else read the tenant's every version on versions_by_tenant
// rather than sort a vCon's few).
const qVersions = `SELECT ` + versionCols + `, (c.current IS v.id) FROM versions v
	CROSS JOIN vcons c ON c.tenant = v.tenant AND c.uuid = v.uuid
	WHERE v.tenant = ? AND v.uuid = ? AND v.purge = 0 ORDER BY v.id DESC`

// Versions lists the kept versions of a vCon, newest first.
func (c *Catalog) Versions(ctx context.Context, tenant, uuid ids.ID) ([]Version, error) {
	return c.versions(ctx, qVersions, true, tenant[:], uuid[:])
}

// qCurrent pages through a tenant's vCons by uuid: the primary key, whose
// range holds the deleted ones too (no index of those with a current
// version pays for itself at every store).
const qCurrent = `SELECT uuid FROM vcons
	WHERE tenant = ? AND uuid > ? AND current IS NOT NULL ORDER BY uuid LIMIT ?`

// ListCurrent pages through a tenant's vCons that have a current version,
// in uuid byte order, after the given uuid.
func (c *Catalog) ListCurrent(ctx context.Context, tenant ids.ID, after ids.ID, limit int) ([]ids.ID, error) {
	return queryAll(ctx, c.db, "vCons", scanID, qCurrent, tenant[:], after[:], limit)
}

// VersionIDs lists every version of a vCon the catalog still has: current,
// hidden, or with its purge under way.
func (tx *Tx) VersionIDs(tenant, uuid ids.ID) ([]ids.ID, error) {
	return queryAll(tx.ctx, tx.tx, "versions of a vCon", scanID, `SELECT id FROM versions WHERE tenant = ? AND uuid = ?`, tenant[:], uuid[:])
}

// CountByLocation counts versions (purged or not) at each location.
func (c *Catalog) CountByLocation(ctx context.Context) (map[Location]int, error) {
	out := map[Location]int{}
	err := eachRow(ctx, c.db, "version counts", func(r row) error {
		var l string
		var n int
		if err := r.Scan(&l, &n); err != nil {
			return err
		}
		out[Location(l)] = n
		return nil
	}, `SELECT location, count(*) FROM versions GROUP BY location`)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Exists reports whether the catalog has a row for the version.
func (c *Catalog) Exists(ctx context.Context, id ids.ID) (bool, error) {
	var n int
	err := c.queryRow(ctx, `SELECT count(*) FROM versions WHERE id = ?`, id[:]).Scan(&n)
	return n > 0, err
}

// TenantsWithPacked counts the tenants that have packed versions.
func (c *Catalog) TenantsWithPacked(ctx context.Context) (int, error) {
	var n int
	err := c.queryRow(ctx, `SELECT count(DISTINCT tenant) FROM versions WHERE location = ?`, string(Packed)).Scan(&n)
	return n, err
}

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
	return queryAll(ctx, c.db, "versions", func(r row) (Version, error) {
		var cur bool
		var extra []any
		if withCurrent {
			extra = append(extra, &cur)
		}
		v, err := scanVersion(r, extra...)
		v.Current = cur
		return v, err
	}, q, args...)
}

// CountKept counts every tenant's kept versions.
func (c *Catalog) CountKept(ctx context.Context) (int, error) {
	var n int
	err := c.db.QueryRowContext(ctx, `SELECT count(*) FROM versions WHERE purge = 0`).Scan(&n)
	return n, err
}

// The queries of a Parquet export (docs/export.md). An export never holds a
// read transaction across I/O: it takes the newest version id once, then
// lists pages of versions in id order, each page one short read.

// qNewest reads the last id of a tenant's range of versions_by_tenant.
const qNewest = `SELECT max(id) FROM versions WHERE tenant = ?`

// NewestVersion returns the highest version id the tenant has, purged or
// not, and false when it has none. Version ids are UUIDv7, so every version
// stored later has a higher id: an export that lists only the ids up to
// this one is a copy as of the moment it read it.
func (c *Catalog) NewestVersion(ctx context.Context, tenant ids.ID) (ids.ID, bool, error) {
	var b []byte
	err := c.db.QueryRowContext(ctx, qNewest, tenant[:]).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && b == nil) {
		return ids.ID{}, false, nil
	}
	if err != nil {
		return ids.ID{}, false, fmt.Errorf("catalog: newest version: %w", err)
	}
	var id ids.ID
	copy(id[:], b)
	return id, true, nil
}

// qExport pages through a tenant's kept versions by id, up to the newest
// an export takes: versions_by_tenant, from the cursor to upto. The
// primary key's range of ids would serve the query too, reading every
// tenant's versions in it: INDEXED BY keeps SQLite from it whatever its
// statistics say, and makes the query fail if the index is gone; CROSS
// JOIN keeps versions the outer loop.
const qExport = `SELECT ` + versionCols + `, (c.current IS v.id) FROM versions v INDEXED BY versions_by_tenant
	CROSS JOIN vcons c ON c.tenant = v.tenant AND c.uuid = v.uuid
	WHERE v.tenant = ? AND v.id > ? AND v.id <= ? AND v.purge = 0 AND v.stored_at >= ? AND v.stored_at < ?
	ORDER BY v.id LIMIT ?`

// ExportPage lists up to limit of the tenant's kept versions (purge not
// started), current and hidden, whose id is above after and at most upto
// and that were stored at or after since and before until (zero times: no
// bound), in id order. Current is set on each version that is its vCon's
// current one, so neither hidden nor deleted. A page reads the tenant's
// versions from after on, none of another tenant's.
func (c *Catalog) ExportPage(ctx context.Context, tenant, after, upto ids.ID, since, until time.Time, limit int) ([]Version, error) {
	lo, hi := int64(-1<<63), int64(1<<63-1)
	if !since.IsZero() {
		lo = nanos(since)
	}
	if !until.IsZero() {
		hi = nanos(until)
	}
	return c.versions(ctx, qExport, true, tenant[:], after[:], upto[:], lo, hi, limit)
}

// KeptVersions looks the given versions up again and returns those still
// kept (purge not started, key present), by id: what an export checks once
// their bytes have arrived, for many versions in one short read.
func (c *Catalog) KeptVersions(ctx context.Context, list []ids.ID) (map[ids.ID]Version, error) {
	out := make(map[ids.ID]Version, len(list))
	if len(list) == 0 {
		return out, nil
	}
	args := make([]any, len(list))
	for i, id := range list {
		args[i] = id[:]
	}
	q := `SELECT ` + versionCols + ` FROM versions v WHERE v.purge = 0 AND v.wrapped_key IS NOT NULL AND v.id IN (?` + strings.Repeat(",?", len(list)-1) + `)`
	err := eachRow(ctx, c.db, "versions looked up again", func(r row) error {
		v, err := scanVersion(r)
		if err != nil {
			return err
		}
		out[v.ID] = v
		return nil
	}, q, args...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

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

// CountUnsearchable counts a tenant's kept versions the search index
// cannot hold: the encrypted ones, and those whose metadata was left
// unread (docs/signatures.md). It reads the tenant's range of
// versions_by_tenant, outside any write.
func (c *Catalog) CountUnsearchable(ctx context.Context, tenant ids.ID) (int, error) {
	var n int
	err := c.db.QueryRowContext(ctx, `SELECT count(*) FROM versions WHERE tenant = ? AND purge = 0 AND (form = ? OR unread IS NOT NULL)`,
		tenant[:], string(vocab.FormEncrypted)).Scan(&n)
	return n, err
}

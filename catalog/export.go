package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/ids"
)

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
	rows, err := c.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("catalog: look versions up again: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		v, err := scanVersion(rows)
		if err != nil {
			return nil, err
		}
		out[v.ID] = v
	}
	return out, rows.Err()
}

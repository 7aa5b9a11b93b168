package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/vcon-server/vcon-server/ids"
)

// The queries of a Parquet export (docs/export.md). An export never holds a
// read transaction across I/O: it takes the newest version id once, then
// lists pages of versions in id order, each page one short read.

// NewestVersion returns the highest version id the tenant has, purged or
// not, and false when it has none. Version ids are UUIDv7, so every version
// stored later has a higher id: an export that lists only the ids up to
// this one is a copy as of the moment it read it.
func (c *Catalog) NewestVersion(ctx context.Context, tenant ids.ID) (ids.ID, bool, error) {
	var b []byte
	err := c.db.QueryRowContext(ctx, `SELECT max(id) FROM versions WHERE tenant = ?`, tenant[:]).Scan(&b)
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

// ExportPage lists up to limit of the tenant's kept versions (purge not
// started), current and hidden, whose id is above after and at most upto
// and that were stored at or after since and before until (zero times: no
// bound), in id order. Current is set on each version that is its vCon's
// current one, so neither hidden nor deleted.
func (c *Catalog) ExportPage(ctx context.Context, tenant, after, upto ids.ID, since, until time.Time, limit int) ([]Version, error) {
	lo, hi := int64(-1<<63), int64(1<<63-1)
	if !since.IsZero() {
		lo = nanos(since)
	}
	if !until.IsZero() {
		hi = nanos(until)
	}
	rows, err := c.db.QueryContext(ctx, `SELECT `+versionCols+`, (c.current IS v.id) FROM versions v
		JOIN vcons c ON c.tenant = v.tenant AND c.uuid = v.uuid
		WHERE v.id > ? AND v.id <= ? AND v.tenant = ? AND v.purge = 0 AND v.stored_at >= ? AND v.stored_at < ?
		ORDER BY v.id LIMIT ?`, after[:], upto[:], tenant[:], lo, hi, limit)
	if err != nil {
		return nil, fmt.Errorf("catalog: list versions to export: %w", err)
	}
	defer rows.Close()
	var out []Version
	for rows.Next() {
		var cur bool
		v, err := scanVersion(rows, &cur)
		if err != nil {
			return nil, err
		}
		v.Current = cur
		out = append(out, v)
	}
	return out, rows.Err()
}

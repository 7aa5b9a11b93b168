//go:build !nologtree

package catalog

import (
	"context"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
)

// logTrees: every record is a leaf of its log (docs/FORMAT.md, "Audit log
// tree"). Only the baseline of the trees' cost benchmark is built without
// them (-tags nologtree, test/e2e's BenchmarkLogTrees).
const logTrees = true

// logTreesMigration ends migration 19 (catalog/schema.go): a tenant's
// log_nodes rows are its records' index, so audit_by_tenant goes. A log
// written while the clock went back, before its times were kept in order
// (Tx.recordTime), is noted: audit_unordered.
const logTreesMigration = `
INSERT INTO meta(key, value) SELECT 'audit_unordered', 1 WHERE EXISTS (
	SELECT 1 FROM (SELECT at < lag(at) OVER (PARTITION BY tenant ORDER BY id) AS back FROM audit) WHERE back);
DROP INDEX audit_by_tenant;
`

// auditQuery is the query of a tenant's records stored from since until
// until, and its first arguments: the span of its log that holds them.
func (c *Catalog) auditQuery(ctx context.Context, tenant ids.ID, since, until time.Time) (string, []any, error) {
	base, lo, hi, err := c.logSpan(ctx, LogID(tenant), since, until)
	if err != nil {
		return "", nil, err
	}
	return qAuditSpan, []any{base + int64(lo), base + int64(hi)}, nil
}

//go:build nologtree

package catalog

import (
	"context"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
)

// logTrees is false in the benchmark's baseline build only: records are
// rows, as before the logs were trees. Never released.
const logTrees = false

// logTreesMigration keeps audit_by_tenant, the index of qAudit.
const logTreesMigration = `SELECT 1`

// qAudit reads a tenant's records in a time range, in time order, after
// a cursor: audit_by_tenant, whose rows end with the record's id.
const qAudit = `SELECT id, at, actor, label, action, target, status, '' FROM audit
	WHERE tenant = ? AND at >= ? AND at < ? AND (at, id) > (?, ?) ORDER BY at, id LIMIT ?`

func (c *Catalog) auditQuery(ctx context.Context, tenant ids.ID, since, until time.Time) (string, []any, error) {
	return qAudit, []any{tenant[:]}, nil
}

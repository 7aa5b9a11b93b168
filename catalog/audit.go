package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/vcon-server/vcon-server/ids"
)

// Record is one line of a tenant's audit log or of the admin log. Target is
// a vCon uuid, a key id or a tenant id, never vCon content.
type Record struct {
	Time   time.Time `json:"time"`
	Tenant string    `json:"tenant,omitempty"`
	Actor  string    `json:"actor"`
	Label  string    `json:"label"`
	Action string    `json:"action"`
	Target string    `json:"target,omitempty"`
	Status int       `json:"status"`
}

// Audit appends r to tenant's audit log.
func (tx *Tx) Audit(tenant ids.ID, r Record) error {
	_, err := tx.exec(`INSERT INTO audit(tenant, at, actor, label, action, target, status) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		tenant[:], nanos(tx.now), r.Actor, r.Label, r.Action, nullString(r.Target), r.Status)
	return err
}

// AdminLog appends r to the admin log.
func (tx *Tx) AdminLog(r Record) error {
	_, err := tx.exec(`INSERT INTO admin_log(at, actor, label, action, tenant, target, status) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		nanos(tx.now), r.Actor, r.Label, r.Action, nullString(r.Tenant), nullString(r.Target), r.Status)
	return err
}

// Audit appends one record to a tenant's log in a write of its own.
func (c *Catalog) Audit(ctx context.Context, tenant ids.ID, r Record) error {
	return c.UpdateSmall(ctx, func(tx *Tx) error { return tx.Audit(tenant, r) })
}

// NoteAudit appends the record of a request that changed nothing (a read,
// a refusal) to a tenant's log as a note: committed, its fsync shared
// (Note).
func (c *Catalog) NoteAudit(ctx context.Context, tenant ids.ID, r Record) error {
	return c.Note(ctx, func(tx *Tx) error { return tx.Audit(tenant, r) })
}

// AdminLog appends one record to the admin log in a write of its own.
func (c *Catalog) AdminLog(ctx context.Context, r Record) error {
	return c.UpdateSmall(ctx, func(tx *Tx) error { return tx.AdminLog(r) })
}

// NoteAdminLog appends the record of a refusal to the admin log as a note.
func (c *Catalog) NoteAdminLog(ctx context.Context, r Record) error {
	return c.Note(ctx, func(tx *Tx) error { return tx.AdminLog(r) })
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// qAudit reads a tenant's records in a time range, in time order:
// audit_by_tenant, whose rows end with the record's id.
const qAudit = `SELECT at, actor, label, action, target, status, '' FROM audit
	WHERE tenant = ? AND at >= ? AND at < ? ORDER BY at, id`

// qAdminLog reads the admin log's records in a time range, in time order:
// admin_log_by_time.
const qAdminLog = `SELECT at, actor, label, action, target, status, tenant FROM admin_log
	WHERE at >= ? AND at < ? ORDER BY at, id`

// AuditRecords streams a tenant's records in time order (in the order they
// were written, for one time), stored at or after since and before until
// (zero times: no bound).
func (c *Catalog) AuditRecords(ctx context.Context, tenant ids.ID, since, until time.Time, fn func(Record) error) error {
	return c.records(ctx, qAudit, []any{tenant[:]}, since, until, func(r Record) error {
		r.Tenant = tenant.String()
		return fn(r)
	})
}

// AdminRecords streams the admin log as AuditRecords does a tenant's.
func (c *Catalog) AdminRecords(ctx context.Context, since, until time.Time, fn func(Record) error) error {
	return c.records(ctx, qAdminLog, nil, since, until, fn)
}

func (c *Catalog) records(ctx context.Context, q string, args []any, since, until time.Time, fn func(Record) error) error {
	lo, hi := int64(-1<<63), int64(1<<63-1)
	if !since.IsZero() {
		lo = nanos(since)
	}
	if !until.IsZero() {
		hi = nanos(until)
	}
	rows, err := c.db.QueryContext(ctx, q, append(args, lo, hi)...)
	if err != nil {
		return fmt.Errorf("catalog: read audit log: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r Record
		var at int64
		var target, tenant sql.NullString
		if err := rows.Scan(&at, &r.Actor, &r.Label, &r.Action, &target, &r.Status, &tenant); err != nil {
			return fmt.Errorf("catalog: read audit log: %w", err)
		}
		r.Time, r.Target, r.Tenant = fromNanos(at), target.String, tenant.String
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
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

// Audit appends r to tenant's audit log, its row and its leaf
// (catalog/logtree.go); AuditIndex then names its index.
func (tx *Tx) Audit(tenant ids.ID, r Record) error {
	log := LogID(tenant)
	at, err := tx.recordTime(log)
	if err != nil {
		return err
	}
	res, err := tx.exec(`INSERT INTO audit(tenant, at, actor, label, action, target, status) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		tenant[:], at, r.Actor, r.Label, r.Action, nullString(r.Target), r.Status)
	if err != nil {
		return err
	}
	r.Time, r.Tenant = fromNanos(at), ""
	return tx.appendRecord(log, res, r)
}

// AdminLog appends r to the admin log, its row and its leaf.
func (tx *Tx) AdminLog(r Record) error {
	at, err := tx.recordTime(AdminLogID)
	if err != nil {
		return err
	}
	res, err := tx.exec(`INSERT INTO admin_log(at, actor, label, action, tenant, target, status) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		at, r.Actor, r.Label, r.Action, nullString(r.Tenant), nullString(r.Target), r.Status)
	if err != nil {
		return err
	}
	r.Time = fromNanos(at)
	return tx.appendRecord(AdminLogID, res, r)
}

func (tx *Tx) appendRecord(log []byte, res sql.Result, r Record) error {
	if !logTrees {
		return nil
	}
	id, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("catalog: append to the audit log: %w", err)
	}
	i, err := appendLeaf(tx, log, id, r)
	tx.auditIndex = &i
	return err
}

// AuditIndex is the index in its log of the last record this call
// appended (Audit, AdminLog); false when it appended none.
func (tx *Tx) AuditIndex() (uint64, bool) {
	if tx.auditIndex == nil {
		return 0, false
	}
	return *tx.auditIndex, true
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

// qAuditSpan reads a tenant's records at node ids [lo, hi) of its log in
// a time range, after a cursor, in index order: time order, since a
// log's times never decrease (Tx.recordTime), so that the log's own
// nodes are the records' index and no other is written with each
// (catalog/logtrees_on.go).
const qAuditSpan = `SELECT a.id, a.at, a.actor, a.label, a.action, a.target, a.status, '' FROM log_nodes n JOIN audit a ON a.id = n.rec
	WHERE n.id >= ? AND n.id < ? AND a.at >= ? AND a.at < ? AND (a.at, a.id) > (?, ?) ORDER BY n.id LIMIT ?`

// qAdminLog reads the admin log's records in a time range, in time
// order, after a cursor: admin_log_by_time, whose rows end with the
// record's id.
const qAdminLog = `SELECT id, at, actor, label, action, target, status, tenant FROM admin_log
	WHERE at >= ? AND at < ? AND (at, id) > (?, ?) ORDER BY at, id LIMIT ?`

// A Cursor is where a page of a log ended: the next page starts after it.
// The zero Cursor is before the first record.
type Cursor struct{ at, id int64 }

// String is the cursor as a client sends it back: two numbers.
func (c Cursor) String() string {
	return strconv.FormatInt(c.at, 10) + "." + strconv.FormatInt(c.id, 10)
}

// ParseCursor reads what Cursor.String wrote.
func ParseCursor(s string) (Cursor, error) {
	a, b, ok := strings.Cut(s, ".")
	at, err1 := strconv.ParseInt(a, 10, 64)
	id, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || id < 1 {
		return Cursor{}, fmt.Errorf("%q is not a cursor of the log: send the one the last page named", s)
	}
	return Cursor{at, id}, nil
}

// LogRange is which records a read of a log takes: those stored at or
// after Since and before Until (zero times: no bound), after After, at
// most Limit of them (0: every one).
type LogRange struct {
	Since, Until time.Time
	After        Cursor
	Limit        int
}

// AuditRecords streams a tenant's records in time order (in the order they
// were written, for one time), stored at or after since and before until
// (zero times: no bound).
func (c *Catalog) AuditRecords(ctx context.Context, tenant ids.ID, since, until time.Time, fn func(Record) error) error {
	q, args, err := c.auditQuery(ctx, tenant, since, until)
	if err != nil {
		return err
	}
	return c.records(ctx, q, args, LogRange{Since: since, Until: until}, func(r Record, _ Cursor) error {
		r.Tenant = tenant.String()
		return fn(r)
	})
}

// AdminRecords streams the admin log as AuditRecords does a tenant's.
func (c *Catalog) AdminRecords(ctx context.Context, since, until time.Time, fn func(Record) error) error {
	return c.records(ctx, qAdminLog, nil, LogRange{Since: since, Until: until}, func(r Record, _ Cursor) error { return fn(r) })
}

// AdminPage reads one page of the admin log, in the order of AdminRecords:
// at most rg.Limit records (1 or more) after rg.After. more says whether
// records follow; next is then where the page ended.
func (c *Catalog) AdminPage(ctx context.Context, rg LogRange) (page []Record, next Cursor, more bool, err error) {
	limit := rg.Limit
	rg.Limit++ // one more than asked for tells whether another page follows
	err = c.records(ctx, qAdminLog, nil, rg, func(r Record, at Cursor) error {
		if len(page) == limit {
			more = true
			return nil
		}
		page, next = append(page, r), at
		return nil
	})
	if err != nil {
		return nil, Cursor{}, false, err
	}
	return page, next, more, nil
}

// records calls fn with each record of q in rg and the cursor after it.
func (c *Catalog) records(ctx context.Context, q string, args []any, rg LogRange, fn func(Record, Cursor) error) error {
	lo, hi := int64(-1<<63), int64(1<<63-1)
	if !rg.Since.IsZero() {
		lo = nanos(rg.Since)
	}
	if !rg.Until.IsZero() {
		hi = nanos(rg.Until)
	}
	after := rg.After
	if after == (Cursor{}) {
		after = Cursor{-1 << 63, -1 << 63}
	}
	limit := int64(-1) // SQLite: no limit
	if rg.Limit > 0 {
		limit = int64(rg.Limit)
	}
	return eachRow(ctx, c.db, "audit log", func(rw row) error {
		var r Record
		var cur Cursor
		var target, tenant sql.NullString
		if err := rw.Scan(&cur.id, &cur.at, &r.Actor, &r.Label, &r.Action, &target, &r.Status, &tenant); err != nil {
			return fmt.Errorf("catalog: read audit log: %w", err)
		}
		r.Time, r.Target, r.Tenant = fromNanos(cur.at), target.String, tenant.String
		return fn(r, cur)
	}, q, append(args, lo, hi, after.at, after.id, limit)...)
}

// Actor is who made a change, as the audit logs record it: "cli" or
// "key:<key id>", with the key's label.
type Actor struct {
	Name  string
	Label string
}

// CLI is the actor of every command-line change.
var CLI = Actor{Name: "cli"}

func (tx *Tx) record(by Actor, tenant *ids.ID, adminAction, tenantAction, target string) error {
	r := Record{Actor: by.Name, Label: by.Label, Action: adminAction, Target: target, Status: 200}
	if tenant != nil {
		r.Tenant = tenant.String()
	}
	if err := tx.AdminLog(r); err != nil {
		return err
	}
	if tenant != nil && tenantAction != "" {
		r.Action, r.Tenant = tenantAction, ""
		return tx.Audit(*tenant, r)
	}
	return nil
}

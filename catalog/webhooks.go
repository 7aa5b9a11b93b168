package catalog

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
)

// The webhook outbox (docs/FORMAT.md, "Webhook outbox"). Triggers write an
// event row in the transaction that makes the change it announces, so no
// commit can make a change without its event, whichever process or code
// path made it; a tenant without a webhook gets no rows. The sender reads
// the rows, and deletes each once its receiver took it.

// Event types, as the body's "type" names them (docs/webhooks.md).
const (
	EventStored   = "vcon.stored"
	EventReplaced = "vcon.replaced"
	EventDeleted  = "vcon.deleted"
	EventPurged   = "vcon.purged"
	EventErased   = "erasure.completed"
	// EventExpired is a vCon whose lawful basis expired, written as the
	// erasure that takes it starts (docs/lawful-basis.md, "Expiry").
	EventExpired = "vcon.expired"
	// EventCheckpoint is a new signed checkpoint of the tenant's audit
	// log (docs/audit-log.md, "Witnesses"): its row holds the tenant id
	// in uuid, so a log's checkpoints go out in order, and the size in
	// version; the sender reads the note at that size when it sends.
	EventCheckpoint = "audit.checkpoint"
)

// eventNow is the trigger's clock: Unix nanoseconds, to the millisecond.
const eventNow = `CAST(unixepoch('subsec') * 1000 AS INTEGER) * 1000000`

func eventInsert(uuid, version, typ string) string {
	return `INSERT INTO webhook_events(msg_id, tenant, uuid, version, type, at)
	SELECT 'msg_' || lower(hex(randomblob(16))), w.tenant, ` + uuid + `, ` + version + `, ` + typ + `, ` + eventNow + `
	FROM webhooks w WHERE w.tenant = `
}

// eventTriggers names each trigger with its statement. A vCon's current
// version is what its events announce: made (stored), moved (replaced),
// cleared (deleted); a version's key destroyed (purged). An erasure's one
// event is written by the code that records it done (ErasureCompleted).
var eventTriggers = []struct{ name, sql string }{
	{"webhook_vcon_new", `AFTER INSERT ON vcons WHEN NEW.current IS NOT NULL BEGIN ` +
		eventInsert("NEW.uuid", "NEW.current", `'`+EventStored+`'`) + `NEW.tenant; END`},
	{"webhook_vcon_current", `AFTER UPDATE OF current ON vcons WHEN NEW.current IS NOT OLD.current BEGIN ` +
		eventInsert("NEW.uuid", "COALESCE(NEW.current, OLD.current)",
			`CASE WHEN NEW.current IS NULL THEN '`+EventDeleted+`' WHEN OLD.current IS NULL THEN '`+EventStored+`' ELSE '`+EventReplaced+`' END`) +
		`NEW.tenant; END`},
	{"webhook_version_purged", `AFTER UPDATE OF purge ON versions WHEN OLD.purge = 0 AND NEW.purge <> 0 BEGIN ` +
		eventInsert("NEW.uuid", "NEW.id", `'`+EventPurged+`'`) + `NEW.tenant; END`},
	// A checkpoint recorded by the signing pass: a first one, or one over
	// more records (or under a new log name). The admin log's key is no
	// tenant's, so it never has a webhook.
	{"webhook_checkpoint_new", `AFTER INSERT ON log_checkpoints WHEN length(NEW.log) = 16 BEGIN ` +
		eventInsert("NEW.log", "NEW.size", `'`+EventCheckpoint+`'`) + `NEW.log; END`},
	{"webhook_checkpoint", `AFTER UPDATE ON log_checkpoints WHEN length(NEW.log) = 16 AND (NEW.size > OLD.size OR NEW.note IS NOT OLD.note) BEGIN ` +
		eventInsert("NEW.log", "NEW.size", `'`+EventCheckpoint+`'`) + `NEW.log; END`},
}

// webhookTriggers makes the outbox's triggers when the catalog lacks one:
// at every open, since a catalog rebuilt from the replica has tables and
// indexes only.
func (c *Catalog) webhookTriggers(ctx context.Context) error {
	var n int
	if err := c.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'webhook\_%' ESCAPE '\'`).Scan(&n); err != nil {
		return fmt.Errorf("catalog: read the webhook triggers: %w", err)
	}
	if n == len(eventTriggers) {
		return nil
	}
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("catalog: webhook triggers: %w", err)
	}
	defer tx.Rollback()
	for _, t := range eventTriggers {
		if _, err := tx.ExecContext(ctx, `CREATE TRIGGER IF NOT EXISTS `+t.name+` `+t.sql); err != nil {
			return fmt.Errorf("catalog: webhook trigger %s: %w", t.name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("catalog: webhook triggers: %w", err)
	}
	return nil
}

// Webhook is a tenant's endpoint.
type Webhook struct {
	Tenant ids.ID
	URL    string
	Secret []byte // sealed under the master key (seal.MasterKey.SealSecret)
	// KeyCheck is the check value of the master key Secret was sealed
	// under, for SetWebhook's guard (ErrKeyRotated); not stored.
	KeyCheck  []byte
	CAPEM     string // the certificates the endpoint's must chain to; "" for the system's
	CreatedAt time.Time
	Parked    string // why the sender parked it (ParkWebhook); "" when it is not
}

// SetWebhook sets or replaces a tenant's webhook, recorded in both logs.
// Events already pending go to the new endpoint; a parked webhook is
// parked no more.
func (c *Catalog) SetWebhook(ctx context.Context, w Webhook, by Actor) error {
	return c.Update(ctx, func(tx *Tx) error {
		if err := tx.requireKeyCheck(w.KeyCheck); err != nil {
			return err
		}
		if _, err := tx.exec(`INSERT INTO webhooks(tenant, url, secret, ca_pem, created_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT(tenant) DO UPDATE SET url = excluded.url, secret = excluded.secret, ca_pem = excluded.ca_pem, created_at = excluded.created_at, parked = NULL`,
			w.Tenant[:], w.URL, w.Secret, nullString(w.CAPEM), nanos(tx.now)); err != nil {
			return err
		}
		return tx.record(by, &w.Tenant, "tenant_webhook", "webhook", "on")
	})
}

// DropWebhook turns a tenant's webhook off and drops its events, pending
// and failed, recording how many in both logs. It returns that number.
func (c *Catalog) DropWebhook(ctx context.Context, tenant ids.ID, by Actor) (int, error) {
	var n int64
	err := c.Update(ctx, func(tx *Tx) error {
		if _, err := tx.exec(`DELETE FROM webhooks WHERE tenant = ?`, tenant[:]); err != nil {
			return err
		}
		res, err := tx.exec(`DELETE FROM webhook_events WHERE tenant = ?`, tenant[:])
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		return tx.record(by, &tenant, "tenant_webhook", "webhook", "off dropped="+strconv.FormatInt(n, 10))
	})
	return int(n), err
}

// Webhook returns a tenant's webhook; ErrNotFound when it has none.
func (c *Catalog) Webhook(ctx context.Context, tenant ids.ID) (Webhook, error) {
	w := Webhook{Tenant: tenant}
	var ca, parked sql.NullString
	var at int64
	err := c.db.QueryRowContext(ctx, `SELECT url, secret, ca_pem, created_at, parked FROM webhooks WHERE tenant = ?`, tenant[:]).Scan(&w.URL, &w.Secret, &ca, &at, &parked)
	if errors.Is(err, sql.ErrNoRows) {
		return w, ErrNotFound
	}
	if err != nil {
		return w, fmt.Errorf("catalog: read webhook: %w", err)
	}
	w.CAPEM, w.CreatedAt, w.Parked = ca.String, fromNanos(at), parked.String
	return w, nil
}

// ErasureCompleted writes an erasure's erasure.completed event when its
// tenant has a webhook: once, in the transaction that records the erasure
// done (docs/erasure.md), so the event commits with it or not at all. The
// erasure id takes the uuid column, which orders delivery: the event is
// alone in its lane, and DueEvents holds it behind the pending events of
// the vCons the erasure took (docs/FORMAT.md, "Webhook outbox").
func (tx *Tx) ErasureCompleted(tenant, erasure ids.ID) error {
	_, err := tx.exec(`INSERT INTO webhook_events(msg_id, tenant, uuid, version, type, at)
	SELECT 'msg_' || lower(hex(randomblob(16))), w.tenant, ?, NULL, '`+EventErased+`', `+eventNow+`
	FROM webhooks w WHERE w.tenant = ?`, erasure[:], tenant[:])
	return err
}

// Event is one row of the outbox.
type Event struct {
	ID       int64 // the outbox's order
	MsgID    string
	Tenant   ids.ID
	UUID     ids.ID // zero for an erasure's event and a checkpoint's
	Version  ids.ID // zero for an erasure's event and a checkpoint's
	Erasure  ids.ID // an erasure.completed event's erasure; zero for the others
	Size     uint64 // an audit.checkpoint event's checkpoint size; zero for the others
	Type     string
	At       time.Time
	Failed   bool
	Attempts int
	NextAt   time.Time
	Error    string
}

const eventCols = `e.id, e.msg_id, e.tenant, e.uuid, e.version, e.type, e.at, e.failed, e.attempts, e.next_at, e.error`

func (c *Catalog) events(ctx context.Context, q string, args ...any) ([]Event, error) {
	return queryAll(ctx, c.db, "events", scanEvent, q, args...)
}

func scanEvent(r row) (Event, error) {
	var e Event
	var tenant, uuid []byte
	var version any // a version id, or a checkpoint's size
	var at, next int64
	var msg sql.NullString
	if err := r.Scan(&e.ID, &e.MsgID, &tenant, &uuid, &version, &e.Type, &at, &e.Failed, &e.Attempts, &next, &msg); err != nil {
		return e, fmt.Errorf("catalog: read events: %w", err)
	}
	copy(e.Tenant[:], tenant)
	switch e.Type {
	case EventErased:
		copy(e.Erasure[:], uuid)
	case EventCheckpoint:
		n, ok := version.(int64)
		if !ok || n < 0 {
			return e, fmt.Errorf("catalog: the outbox's checkpoint event %d holds no size", e.ID)
		}
		e.Size = uint64(n)
	default:
		copy(e.UUID[:], uuid)
		b, _ := version.([]byte)
		copy(e.Version[:], b)
	}
	e.At, e.NextAt, e.Error = fromNanos(at), fromNanos(next), msg.String
	return e, nil
}

// qDueEvents reads, for each tenant with a webhook that is not parked in
// a range of tenant ids (in their order, from webhooks' primary key), the
// heads of its outbox: up to perTenant pending events due by a time, in
// the order of webhook_events_by_tenant_due (next attempt's time, then
// id). Each is checked in webhook_events_by_vcon for an earlier pending
// event of its vCon; an erasure's event, whose uuid column holds the
// erasure id, also for an earlier pending event of any uuid the erasure
// took (erased's key). A tenant's backlog costs the read its perTenant
// heads only, so every tenant of the range is reached.
const qDueEvents = `SELECT ` + eventCols + ` FROM webhooks w CROSS JOIN webhook_events e
	WHERE w.tenant > ? AND w.tenant <= ? AND w.parked IS NULL AND e.id IN (
	SELECT p.id FROM webhook_events p INDEXED BY webhook_events_by_tenant_due
	WHERE p.tenant = w.tenant AND p.failed = 0 AND p.next_at <= ?
	  AND NOT EXISTS (SELECT 1 FROM webhook_events q INDEXED BY webhook_events_by_vcon
		WHERE q.tenant = p.tenant AND q.uuid = p.uuid AND q.id < p.id AND q.failed = 0)
	  AND (p.type <> '` + EventErased + `' OR NOT EXISTS (SELECT 1 FROM erased x
		CROSS JOIN webhook_events q INDEXED BY webhook_events_by_vcon ON q.tenant = x.tenant AND q.uuid = x.uuid
		WHERE x.erasure = p.uuid AND q.id < p.id AND q.failed = 0))
	ORDER BY p.next_at, p.id LIMIT ?)
	ORDER BY w.tenant LIMIT ?`

// Bounds of tenant ids: below and above every 16-byte id.
var (
	tenantsStart = []byte{}
	tenantsEnd   = bytes.Repeat([]byte{0xff}, 17)
)

// DueEvents lists up to limit pending events that may be sent at now,
// round-robin by tenant: up to perTenant of each tenant, the tenants after
// `after` first, in the order of their ids, then those from the first to
// `after` (so a caller that passes the last tenant it served gives every
// tenant its turn, however long another's backlog). Of each vCon only its
// oldest pending event is due, so a vCon's events go out in the order
// they were made; an erasure's event only once the events made before it
// of the vCons it took are gone (delivered or failed). A parked tenant's
// events wait (ParkWebhook).
func (c *Catalog) DueEvents(ctx context.Context, now time.Time, after ids.ID, perTenant, limit int) ([]Event, error) {
	evs, err := c.events(ctx, qDueEvents, after[:], tenantsEnd, nanos(now), perTenant, limit)
	if err != nil || len(evs) >= limit {
		return evs, err
	}
	more, err := c.events(ctx, qDueEvents, tenantsStart, after[:], nanos(now), perTenant, limit-len(evs))
	return append(evs, more...), err
}

// ParkWebhook parks a webhook the sender cannot use (its secret does not
// open): its tenant's events wait, out of every read of DueEvents, until
// the webhook is set again; why says so in tenant show. A webhook set
// again since w was read (another secret) is left as it is.
func (c *Catalog) ParkWebhook(ctx context.Context, w Webhook, why string) error {
	return c.Update(ctx, func(tx *Tx) error {
		_, err := tx.exec(`UPDATE webhooks SET parked = ? WHERE tenant = ? AND secret = ?`, why, w.Tenant[:], w.Secret)
		return err
	})
}

// NextDue returns when the earliest pending event may be sent; false when
// none is pending.
func (c *Catalog) NextDue(ctx context.Context) (time.Time, bool, error) {
	var n sql.NullInt64
	if err := c.db.QueryRowContext(ctx, `SELECT min(next_at) FROM webhook_events WHERE failed = 0`).Scan(&n); err != nil {
		return time.Time{}, false, fmt.Errorf("catalog: read events: %w", err)
	}
	return fromNanos(n.Int64), n.Valid, nil
}

// EventCounts returns how many events are pending and how many failed.
func (c *Catalog) EventCounts(ctx context.Context) (pending, failed int, err error) {
	err = c.db.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE failed = 0), count(*) FILTER (WHERE failed <> 0) FROM webhook_events`).Scan(&pending, &failed)
	return pending, failed, err
}

// FailedEvents lists a tenant's failed events, oldest first.
func (c *Catalog) FailedEvents(ctx context.Context, tenant ids.ID) ([]Event, error) {
	return c.events(ctx, `SELECT `+eventCols+` FROM webhook_events e WHERE e.tenant = ? AND e.failed <> 0 ORDER BY e.id`, tenant[:])
}

// RetryFailed makes a tenant's failed events pending again, to be sent at
// once, recorded in both logs; it returns how many.
func (c *Catalog) RetryFailed(ctx context.Context, tenant ids.ID, by Actor) (int, error) {
	var n int64
	err := c.Update(ctx, func(tx *Tx) error {
		res, err := tx.exec(`UPDATE webhook_events SET failed = 0, attempts = 0, next_at = 0 WHERE tenant = ? AND failed <> 0`, tenant[:])
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		return tx.record(by, &tenant, "webhook_retry", "webhook_retry", "events="+strconv.FormatInt(n, 10))
	})
	return int(n), err
}

// Outcome is what one attempt to send an event came to; a zero ID records
// nothing.
type Outcome struct {
	ID        int64
	Delivered bool      // the receiver took it: the row goes
	Failed    bool      // the last attempt failed: webhook retry sends it again
	Attempts  int       // failed attempts so far
	Next      time.Time // when it is tried again
	Error     string    // what the last attempt met (no URL)
}

// RecordOutcomes records a pass's outcomes in one write. A row the
// webhook's turning off dropped meanwhile stays dropped.
func (c *Catalog) RecordOutcomes(ctx context.Context, outs []Outcome) error {
	return c.Update(ctx, func(tx *Tx) error {
		for _, o := range outs {
			var err error
			switch {
			case o.ID == 0:
			case o.Delivered:
				_, err = tx.exec(`DELETE FROM webhook_events WHERE id = ?`, o.ID)
			default:
				_, err = tx.exec(`UPDATE webhook_events SET attempts = ?, next_at = ?, failed = ?, error = ? WHERE id = ?`,
					o.Attempts, nanos(o.Next), o.Failed, o.Error, o.ID)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

package catalog

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/translog"
)

// Each tenant's audit log and the admin log are RFC 6962 Merkle trees
// (docs/FORMAT.md, "Audit log tree"). A record's leaf is its canonical
// bytes (Leaf), appended by the transaction that inserts the record: the
// row of log_nodes at the record's index holds the hashes its leaf
// completes, so that an append writes one row and a proof reads stored
// nodes only.

// AdminLogID is the key of the admin log's tree, "admin", which no
// tenant's (its 16-byte id) can be. Not the empty blob: the replica's
// change log would carry it as NULL.
var AdminLogID = []byte("admin")

// isAdmin reports whether log is the admin log's key.
func isAdmin(log []byte) bool { return string(log) == string(AdminLogID) }

// LogID is the key of tenant's tree.
func LogID(tenant ids.ID) []byte { return tenant[:] }

// leafJSON is the canonical form of a record, its leaf: its fields in
// this order, as encoding/json writes them, never vCon content.
type leafJSON struct {
	Index  uint64 `json:"index"`
	Time   string `json:"time"`
	Tenant string `json:"tenant,omitempty"` // the admin log's records only
	Actor  string `json:"actor"`
	Label  string `json:"label"`
	Action string `json:"action"`
	// Lifecycle is the vCon lifecycle event (draft-howe-vcon-lifecycle)
	// the action is, when one fits (Lifecycle).
	Lifecycle string `json:"lifecycle,omitempty"`
	Target    string `json:"target,omitempty"`
	Status    int    `json:"status"`
}

// Lifecycle is the vCon lifecycle event a record is, beside its action
// (draft-howe-vcon-lifecycle): a store that made a new vCon (201)
// vcon_created, a delete and an erasure's purge vcon_deleted, a purge by
// retention vcon_expired; "" for a refusal or any other action. A
// replacement is not called vcon_enhanced: its 200 is also a retry's,
// which changed nothing, and the row cannot tell them apart. It is a function of the row's columns, so that a leaf is
// recomputed from its row.
func Lifecycle(r Record) string {
	if r.Status >= 300 {
		return ""
	}
	// An action's first word names it; what follows notes its detail
	// ("store signed_by=...", "read purpose=...").
	action, _, _ := strings.Cut(r.Action, " ")
	r.Action = action
	switch {
	case (r.Action == "store" || r.Action == "replace") && r.Status == 201:
		return "vcon_created"
	case r.Action == "delete":
		return "vcon_deleted"
	case r.Action == "purge" && r.Label == "erasure":
		return "vcon_deleted"
	case r.Action == "purge":
		return "vcon_expired"
	}
	return ""
}

// Leaf is the canonical bytes of the record at index of its log, from the
// values its row holds (r.Time to the nanosecond, UTC): what the leaf
// hash is of, and what an entry bundle serves. They are exactly what
// encoding/json writes of leafJSON; the common case, plain ASCII, is
// written here directly (a record costs its append 1 µs less).
func Leaf(index uint64, r Record) []byte { return leaf(make([]byte, 0, 192), index, r)[1:] }

// leafHash is the record's leaf hash, SHA-256(0x00 ‖ Leaf(index, r)), its
// bytes made on the stack.
func leafHash(index uint64, r Record) translog.Hash {
	var buf [256]byte
	return sha256.Sum256(leaf(buf[:0], index, r))
}

// leaf appends 0x00 ‖ Leaf(index, r) to b: what the leaf hash is of.
func leaf(b []byte, index uint64, r Record) []byte {
	t := r.Time.UTC()
	lc := Lifecycle(r)
	start := len(b)
	b = append(b, 0)
	b = strconv.AppendUint(append(b, `{"index":`...), index, 10)
	b = append(t.AppendFormat(append(b, `,"time":"`...), time.RFC3339Nano), '"')
	ok := true
	field := func(name, v string, omitEmpty bool) {
		if omitEmpty && v == "" {
			return
		}
		b = append(append(append(b, `,"`...), name...), `":"`...)
		for i := 0; i < len(v); i++ {
			if c := v[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				ok = false
			}
		}
		b = append(append(b, v...), '"')
	}
	field("tenant", r.Tenant, true)
	field("actor", r.Actor, false)
	field("label", r.Label, false)
	field("action", r.Action, false)
	field("lifecycle", lc, true)
	field("target", r.Target, true)
	b = append(strconv.AppendInt(append(b, `,"status":`...), int64(r.Status), 10), '}')
	if ok {
		return b
	}
	b = b[:start]
	j, err := json.Marshal(leafJSON{Index: index, Time: t.Format(time.RFC3339Nano), Tenant: r.Tenant,
		Actor: r.Actor, Label: r.Label, Action: r.Action, Lifecycle: lc, Target: r.Target, Status: r.Status})
	if err != nil {
		panic(err) // strings and numbers only
	}
	return append(append(b, 0), j...)
}

// A logHead is a log's size and right edge, all an append needs. The
// writer keeps each log's in memory once read (Catalog.heads), so that an
// append writes one row and reads none: a call's appends go to its Tx,
// joined to its batch's when the call succeeds and to the catalog's when
// the batch commits, so that a rollback leaves none behind
// (catalog/writer.go).
type logHead struct {
	size uint64
	last int64     // the time of the last record (nanoseconds), 0 for none
	edge *edgeNode // the rightmost root
}

// An edgeNode is a root of a log's right edge (the root of a complete
// subtree), linked to the next on its left. None changes once made: an
// append makes one and shares those left of it, so the heads of a call,
// of its batch and of the catalog share their edges, never copy them.
type edgeNode struct {
	h    translog.Hash
	left *edgeNode
}

// logTx is what an append needs of a transaction: a Tx, or the raw
// transaction of a restore (rawTx).
type logTx interface {
	queryRow(q string, args ...any) *sql.Row
	head(log []byte) (logHead, error)
	setHead(log []byte, h logHead)
	addNodes(n nodeRow) error
}

func (tx *Tx) head(log []byte) (logHead, error) {
	for i := range tx.heads {
		if tx.heads[i].log == string(log) {
			return tx.heads[i].h, nil
		}
	}
	if h, ok := tx.batch[string(log)]; ok {
		return h, nil
	}
	// A kept head is used unread: one another process (the CLI beside a
	// serving server) appended past since makes the batch's insert at its
	// size collide, and the batch runs again with every head read from
	// the rows (errStaleHead).
	h, ok := tx.c.heads[string(log)]
	if !ok {
		var err error
		if h, err = readHead(tx, log); err != nil {
			return logHead{}, err
		}
	}
	tx.batch[string(log)] = h // read, not written: true whatever the call does
	return h, nil
}

// forgetHead drops the kept head of log, whose nodes the call deletes (a
// tenant's delete): the next append reads it from the rows.
func (tx *Tx) forgetHead(log []byte) { delete(tx.c.heads, string(log)) }

func (tx *Tx) setHead(log []byte, h logHead) {
	for i := range tx.heads {
		if tx.heads[i].log == string(log) {
			tx.heads[i].h = h
			return
		}
	}
	tx.heads = append(tx.heads, callHead{string(log), h})
}

// A callHead is a head a call appended to: a call touches a log or two,
// so a slice, not a map.
type callHead struct {
	log string
	h   logHead
}

// readHead reads a log's head from its stored nodes: its size, then the
// root of each complete subtree, left to right.
func readHead(tx logTx, log []byte) (logHead, error) {
	var size int64
	if err := tx.queryRow(`SELECT coalesce(max(idx) + 1, 0) FROM log_nodes WHERE log = ?`, log).Scan(&size); err != nil {
		return logHead{}, fmt.Errorf("catalog: read the audit log's size: %w", err)
	}
	h := logHead{size: uint64(size)}
	if size > 0 {
		// A missing row (run audit verify) must not stop the appends.
		q := `SELECT coalesce((SELECT a.at FROM log_nodes n JOIN audit a ON a.id = n.rec WHERE n.log = ? AND n.idx = ?), 0)`
		if isAdmin(log) {
			q = `SELECT coalesce((SELECT a.at FROM log_nodes n JOIN admin_log a ON a.id = n.rec WHERE n.log = ? AND n.idx = ?), 0)`
		}
		if err := tx.queryRow(q, log, size-1).Scan(&h.last); err != nil {
			return logHead{}, fmt.Errorf("catalog: read the audit log's last record: %w", err)
		}
	}
	var start uint64
	for l := 63; l >= 0; l-- {
		if h.size>>l&1 == 0 {
			continue
		}
		n, err := readNode(tx.queryRow, log, l, start>>l)
		if err != nil {
			return logHead{}, err
		}
		h.edge = &edgeNode{n, h.edge}
		start += 1 << l
	}
	return h, nil
}

// readNode reads the stored node at level and index of log.
func readNode(queryRow func(string, ...any) *sql.Row, log []byte, level int, index uint64) (translog.Hash, error) {
	var hashes []byte
	rec := translog.StoredAt(level, index)
	if err := queryRow(`SELECT hashes FROM log_nodes WHERE log = ? AND idx = ?`, log, int64(rec)).Scan(&hashes); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return translog.Hash{}, fmt.Errorf("catalog: the audit log has no node %d/%d: %w", level, index, ErrNotFound)
		}
		return translog.Hash{}, fmt.Errorf("catalog: read the audit log: %w", err)
	}
	if len(hashes) < (level+1)*translog.HashSize {
		return translog.Hash{}, fmt.Errorf("catalog: the audit log's record %d holds %d bytes of hashes, too few for its node at level %d: run vcon-server audit verify", rec, len(hashes), level)
	}
	return translog.Hash(hashes[level*translog.HashSize:]), nil
}

// appendLeaf appends the record whose row id is rec to log: r is the
// record as its row holds it. It returns the record's index.
func appendLeaf(tx logTx, log []byte, rec int64, r Record) (uint64, error) {
	h, err := tx.head(log)
	if err != nil {
		return 0, err
	}
	index := h.size
	// The leaf hash (SHA-256(0x00 ‖ bytes): translog.LeafHash), then the
	// node of each level at which index's low bits are all ones, each
	// made of the edge's rightmost root and the one before: the hashes
	// its row holds (docs/FORMAT.md, "Audit log tree"), as Edge.Append.
	n := leafHash(index, r)
	hashes := append(make([]byte, 0, 2*translog.HashSize), n[:]...)
	edge := h.edge
	for l := 0; index>>l&1 == 1; l++ {
		n = translog.NodeHash(edge.h, n)
		edge = edge.left
		hashes = append(hashes, n[:]...)
	}
	if err := tx.addNodes(nodeRow{log, index, rec, hashes}); err != nil {
		return 0, err
	}
	tx.setHead(log, logHead{index + 1, nanos(r.Time), &edgeNode{n, edge}})
	return index, nil
}

// recordTime is the time of a record appended to log now: the batch's,
// or the log's last record's if the clock went back since, so that a
// log's times never decrease and a time range is a span of its indexes
// (AuditRecords).
func (tx *Tx) recordTime(log []byte) (int64, error) {
	at := nanos(tx.now)
	if !logTrees {
		return at, nil
	}
	h, err := tx.head(log)
	if err != nil {
		return 0, err
	}
	return max(at, h.last), nil
}

// rawTx is a *sql.Tx as a logTx, its heads read from its rows.
type rawTx struct {
	ctx   context.Context
	tx    *sql.Tx
	heads map[string]logHead
}

func (t *rawTx) addNodes(n nodeRow) error {
	_, err := t.tx.ExecContext(t.ctx, `INSERT INTO log_nodes(log, idx, rec, hashes) VALUES (?, ?, ?, ?)`, n.log, int64(n.idx), n.rec, n.hashes)
	return err
}
func (t *rawTx) queryRow(q string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(t.ctx, q, args...)
}
func (t *rawTx) head(log []byte) (logHead, error) {
	if h, ok := t.heads[string(log)]; ok {
		return h, nil
	}
	return readHead(t, log)
}
func (t *rawTx) setHead(log []byte, h logHead) { t.heads[string(log)] = h }

// backfillLogs makes the records of a catalog made before the trees
// leaves, each log's in id order, once: migration 11 left the meta key
// log_backfill, deleted by the transaction that appends them, so that a
// crash before its commit leaves the whole backfill to the next start.
func (c *Catalog) backfillLogs(ctx context.Context) error {
	if _, err := c.Meta(ctx, "log_backfill"); errors.Is(err, ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	return c.Update(ctx, func(tx *Tx) error {
		var logs [][]byte
		err := eachRow(ctx, tx.tx, "audit logs", func(r row) error {
			var t []byte
			err := r.Scan(&t)
			logs = append(logs, t)
			return err
		}, `SELECT DISTINCT tenant FROM audit`)
		if err != nil {
			return err
		}
		for _, log := range append(logs, AdminLogID) {
			if err := tx.backfillLog(log); err != nil {
				return err
			}
		}
		_, err = tx.exec(`DELETE FROM meta WHERE key = 'log_backfill'`)
		return err
	})
}

// backfillLog appends every record of log that has no leaf yet.
func (tx *Tx) backfillLog(log []byte) error {
	type rec struct {
		id int64
		r  Record
	}
	var recs []rec
	q, args := qLogRows+` AND id > ? ORDER BY id`, []any{log, int64(-1)}
	if isAdmin(log) {
		q, args = qAdminRows+` WHERE id > ? ORDER BY id`, []any{int64(-1)}
	}
	var done int64 = -1
	if err := tx.queryRow(`SELECT coalesce(max(rec), -1) FROM log_nodes WHERE log = ?`, log).Scan(&done); err != nil {
		return fmt.Errorf("catalog: read the audit log: %w", err)
	}
	args[len(args)-1] = done
	err := eachRow(tx.ctx, tx.tx, "audit log", func(r row) error {
		id, rc, err := scanLogRow(r)
		recs = append(recs, rec{id, rc})
		return err
	}, q, args...)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if _, err := appendLeaf(tx, log, r.id, r.r); err != nil {
			return err
		}
	}
	return nil
}

// qLogRows and qAdminRows read records as their leaves are made of, a
// tenant's (by tenant) or the admin log's.
const (
	qLogRows   = `SELECT id, at, actor, label, action, target, status, NULL FROM audit WHERE tenant = ?`
	qAdminRows = `SELECT id, at, actor, label, action, target, status, tenant FROM admin_log`
)

func scanLogRow(r row) (int64, Record, error) {
	var rec Record
	var id, at int64
	var target, tenant sql.NullString
	if err := r.Scan(&id, &at, &rec.Actor, &rec.Label, &rec.Action, &target, &rec.Status, &tenant); err != nil {
		return 0, rec, fmt.Errorf("catalog: read audit log: %w", err)
	}
	rec.Time, rec.Target, rec.Tenant = fromNanos(at), target.String, tenant.String
	return id, rec, nil
}

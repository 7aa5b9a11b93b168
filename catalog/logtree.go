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
// nodes only. A node's id is its log's number (logs) << idBits plus the
// index: a log's nodes are one range of ids, appended at its end.

// idBits is how many low bits of a node's id hold the record's index.
const idBits = 40

// logNum is log's number in logs; 0 when it has none (no record yet).
func logNum(queryRow func(string, ...any) *sql.Row, log []byte) (int64, error) {
	var num int64
	err := queryRow(`SELECT num FROM logs WHERE log = ?`, log).Scan(&num)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("catalog: read the audit log's number: %w", err)
	}
	return num, nil
}

// nodeIDs is the range [lo, hi) of the ids of log number num's nodes.
func nodeIDs(num int64) (lo, hi int64) { return num << idBits, (num + 1) << idBits }

// qLogLast is the id of the last node in a range of ids (nodeIDs).
const qLogLast = `SELECT id FROM log_nodes WHERE id >= ? AND id < ? ORDER BY id DESC LIMIT 1`

// logSizeOf is the size of the log numbered num (0: none).
func logSizeOf(queryRow func(string, ...any) *sql.Row, num int64) (uint64, error) {
	if num == 0 {
		return 0, nil
	}
	lo, hi := nodeIDs(num)
	var last int64
	err := queryRow(qLogLast, lo, hi).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("catalog: read the audit log's size: %w", err)
	}
	return uint64(last-lo) + 1, nil
}

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
	num  int64 // the log's number (logs), 0 until its first record
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
	exec(q string, args ...any) (sql.Result, error)
	head(log []byte) (logHead, error)
	setHead(log []byte, h logHead)
	addNodes(n nodeRow) error
}

// numberLog gives log its number in logs at its first record: the row of
// another process that numbered it since the head was read is taken, and
// the batch's insert of the node then collides (errStaleHead).
func numberLog(tx logTx, log []byte) (int64, error) {
	if _, err := tx.exec(`INSERT INTO logs(log) VALUES (?) ON CONFLICT(log) DO NOTHING`, log); err != nil {
		return 0, fmt.Errorf("catalog: number the audit log: %w", err)
	}
	return logNum(tx.queryRow, log)
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

// readHead reads a log's head from its stored nodes: its number and size,
// its last record's time, then the root of each complete subtree, left to
// right.
func readHead(tx logTx, log []byte) (logHead, error) {
	num, err := logNum(tx.queryRow, log)
	if err != nil {
		return logHead{}, err
	}
	h := logHead{num: num}
	if h.size, err = logSizeOf(tx.queryRow, num); err != nil || h.size == 0 {
		return h, err
	}
	lo, _ := nodeIDs(num)
	// A missing row (run audit verify) must not stop the appends.
	q := `SELECT coalesce((SELECT a.at FROM log_nodes n JOIN audit a ON a.id = n.rec WHERE n.id = ?), 0)`
	if isAdmin(log) {
		q = `SELECT coalesce((SELECT a.at FROM log_nodes n JOIN admin_log a ON a.id = n.rec WHERE n.id = ?), 0)`
	}
	if err := tx.queryRow(q, lo+int64(h.size)-1).Scan(&h.last); err != nil {
		return logHead{}, fmt.Errorf("catalog: read the audit log's last record: %w", err)
	}
	var start uint64
	for l := 63; l >= 0; l-- {
		if h.size>>l&1 == 0 {
			continue
		}
		n, err := readNode(tx.queryRow, num, l, start>>l)
		if err != nil {
			return logHead{}, err
		}
		h.edge = &edgeNode{n, h.edge}
		start += 1 << l
	}
	return h, nil
}

// readNode reads the stored node at level and index of the log numbered
// num.
func readNode(queryRow func(string, ...any) *sql.Row, num int64, level int, index uint64) (translog.Hash, error) {
	var hashes []byte
	rec := translog.StoredAt(level, index)
	lo, _ := nodeIDs(num)
	if err := queryRow(`SELECT hashes FROM log_nodes WHERE id = ?`, lo+int64(rec)).Scan(&hashes); err != nil {
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
	if index >= 1<<idBits {
		return 0, fmt.Errorf("catalog: the audit log holds %d records, the most a log can", index)
	}
	if h.num == 0 {
		if h.num, err = numberLog(tx, log); err != nil {
			return 0, err
		}
	}
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
	lo, _ := nodeIDs(h.num)
	if err := tx.addNodes(nodeRow{lo + int64(index), rec, hashes}); err != nil {
		return 0, err
	}
	tx.setHead(log, logHead{h.num, index + 1, nanos(r.Time), &edgeNode{n, edge}})
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

// rawTx is a *sql.Tx as a logTx, its heads read from its rows. It keeps
// the ids of the nodes it wrote, for a restore to note them in the
// replica's change log.
type rawTx struct {
	ctx   context.Context
	tx    *sql.Tx
	heads map[string]logHead
	nodes []int64 // the log_nodes ids written
}

func (t *rawTx) addNodes(n nodeRow) error {
	_, err := t.tx.ExecContext(t.ctx, `INSERT INTO log_nodes(id, rec, hashes) VALUES (?, ?, ?)`, n.id, n.rec, n.hashes)
	t.nodes = append(t.nodes, n.id)
	return err
}
func (t *rawTx) exec(q string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(t.ctx, q, args...)
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
	num, err := logNum(tx.queryRow, log)
	if err != nil {
		return err
	}
	lo, hi := nodeIDs(num)
	var done int64 = -1
	if err := tx.queryRow(`SELECT coalesce(max(rec), -1) FROM log_nodes WHERE id >= ? AND id < ?`, lo, hi).Scan(&done); err != nil {
		return fmt.Errorf("catalog: read the audit log: %w", err)
	}
	args[len(args)-1] = done
	err = eachRow(tx.ctx, tx.tx, "audit log", func(r row) error {
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

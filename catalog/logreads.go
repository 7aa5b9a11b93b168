package catalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"time"

	"github.com/vcon-server/vcon-server/internal/durable"
	"github.com/vcon-server/vcon-server/internal/translog"
)

// Reads of the audit logs' trees (docs/FORMAT.md, "Audit log tree"). A
// node once written never changes, so a read needs no snapshot: what it
// reads within a checkpoint's size is what the checkpoint signed.

// LogSize is the number of records of log.
func (c *Catalog) LogSize(ctx context.Context, log []byte) (uint64, error) {
	num, err := logNum(c.rowQuerier(ctx), log)
	if err != nil {
		return 0, err
	}
	return logSizeOf(c.rowQuerier(ctx), num)
}

// rowQuerier is c.queryRow bound to ctx.
func (c *Catalog) rowQuerier(ctx context.Context) func(string, ...any) *sql.Row {
	return func(q string, args ...any) *sql.Row { return c.queryRow(ctx, q, args...) }
}

// qLogSizes is every log and its size, NULL for one without nodes: a seek
// of each log's last node (qLogLast), in a scan of logs, which holds a row
// a tenant.
const qLogSizes = `SELECT logs.log, (SELECT n.id FROM log_nodes n WHERE n.id >= logs.num << 40 AND n.id < (logs.num + 1) << 40 ORDER BY n.id DESC LIMIT 1)
	+ 1 - (logs.num << 40) FROM logs`

// LogSizes is every log's size but the empty ones', by log key. The
// signing pass asks every second: the query seeks each log's last node,
// never reads a log's rows.
func (c *Catalog) LogSizes(ctx context.Context) (map[string]uint64, error) {
	return logSizes(ctx, c.db)
}

func logSizes(ctx context.Context, q querier) (map[string]uint64, error) {
	out := map[string]uint64{}
	err := eachRow(ctx, q, "audit logs", func(r row) error {
		var log []byte
		var n sql.NullInt64
		err := r.Scan(&log, &n)
		if n.Valid {
			out[string(log)] = uint64(n.Int64)
		}
		return err
	}, qLogSizes)
	return out, err
}

// LogUnreplicated gives, for each log with records the replica does not
// hold yet (noted in replica_log after the log point seq), the index of
// the first: with a [replica], a checkpoint covers only the records below
// it, so that a restore always extends it (docs/FORMAT.md, "Audit log
// tree").
func (c *Catalog) LogUnreplicated(ctx context.Context, seq int64) (map[string]uint64, error) {
	out := map[string]uint64{}
	err := eachRow(ctx, c.db, "the replica's log", func(r row) error {
		var log []byte
		var idx int64
		err := r.Scan(&log, &idx)
		out[string(log)] = uint64(idx)
		return err
	}, `SELECT l.log, min(r.k1) - (l.num << 40) FROM replica_log r JOIN logs l ON l.num = r.k1 >> 40
		WHERE r.seq > ? AND r.tbl = 'log_nodes' GROUP BY l.num`, seq)
	return out, err
}

// LogNodes reads the stored nodes of log: a NodeReader for translog's
// proofs and tiles.
func (c *Catalog) LogNodes(ctx context.Context, log []byte) translog.NodeReader {
	return &nodeReader{query: c.rowQuerier(ctx), log: log}
}

// A nodeReader looks up its log's number at its first node.
type nodeReader struct {
	query func(string, ...any) *sql.Row
	log   []byte
	num   int64
}

func (r *nodeReader) Node(level int, index uint64) (translog.Hash, error) {
	if r.num == 0 {
		num, err := logNum(r.query, r.log)
		if err != nil {
			return translog.Hash{}, err
		}
		if num == 0 {
			return translog.Hash{}, fmt.Errorf("catalog: the audit log has no node %d/%d: %w", level, index, ErrNotFound)
		}
		r.num = num
	}
	return readNode(r.query, r.num, level, index)
}

// LogEntries is the leaves of the records of log at indexes [from,
// from+n), recomputed from their rows: an entry bundle's (tlog-tiles).
func (c *Catalog) LogEntries(ctx context.Context, log []byte, from uint64, n int) ([][]byte, error) {
	num, err := logNum(c.rowQuerier(ctx), log)
	if err != nil {
		return nil, err
	}
	q := `SELECT n.id - ?, a.id, a.at, a.actor, a.label, a.action, a.target, a.status, NULL FROM log_nodes n JOIN audit a ON a.id = n.rec
		WHERE n.id >= ? AND n.id < ? ORDER BY n.id`
	if isAdmin(log) {
		q = `SELECT n.id - ?, a.id, a.at, a.actor, a.label, a.action, a.target, a.status, a.tenant FROM log_nodes n JOIN admin_log a ON a.id = n.rec
		WHERE n.id >= ? AND n.id < ? ORDER BY n.id`
	}
	lo, _ := nodeIDs(num)
	var out [][]byte
	err = eachRow(ctx, c.db, "audit log", func(r row) error {
		var idx int64
		var rec Record
		var id, at int64
		var target, tenant sql.NullString
		if err := r.Scan(&idx, &id, &at, &rec.Actor, &rec.Label, &rec.Action, &target, &rec.Status, &tenant); err != nil {
			return fmt.Errorf("catalog: read audit log: %w", err)
		}
		if uint64(idx) != from+uint64(len(out)) {
			return fmt.Errorf("catalog: the audit log's record %d has no row: run vcon-server audit verify", from+uint64(len(out)))
		}
		rec.Time, rec.Target, rec.Tenant = fromNanos(at), target.String, tenant.String
		out = append(out, Leaf(uint64(idx), rec))
		return nil
	}, q, lo, lo+int64(from), lo+int64(from)+int64(n))
	if err == nil && len(out) != n {
		err = fmt.Errorf("catalog: the audit log's record %d has no row: run vcon-server audit verify", from+uint64(len(out)))
	}
	return out, err
}

// A LogRow is a record as audit verify checks it: its row, the leaf it
// makes, and what the tree holds at its place.
type LogRow struct {
	Index uint64
	ID    int64 // the row's id
	Leaf  []byte
	// Stored is the leaf hash the tree holds at Index and StoredID the
	// row id it was appended for; HasStored is false when the tree holds
	// no leaf there.
	Stored    translog.Hash
	StoredID  int64
	HasStored bool
}

// LogRows calls fn with each record of log in index order (id order),
// then, with ID 0, for each leaf of the tree past the last row: nothing
// of the tree is trusted to say which rows there are.
func (c *Catalog) LogRows(ctx context.Context, log []byte, fn func(LogRow) error) error {
	type stored struct {
		rec  int64
		leaf translog.Hash
	}
	num, err := logNum(c.rowQuerier(ctx), log)
	if err != nil {
		return err
	}
	lo, hi := nodeIDs(num)
	var tree []stored
	err = eachRow(ctx, c.db, "audit log", func(r row) error {
		var idx, rec int64
		var hashes []byte
		if err := r.Scan(&idx, &rec, &hashes); err != nil {
			return fmt.Errorf("catalog: read audit log: %w", err)
		}
		var s stored
		s.rec = rec
		copy(s.leaf[:], hashes)
		if uint64(idx) != uint64(len(tree)) || len(hashes) < translog.HashSize {
			return fmt.Errorf("catalog: the audit log's tree has no leaf %d (or a damaged one)", len(tree))
		}
		tree = append(tree, s)
		return nil
	}, `SELECT id - ?, rec, hashes FROM log_nodes WHERE id >= ? AND id < ? ORDER BY id`, lo, lo, hi)
	if err != nil {
		return err
	}
	q, args := qLogRows+` ORDER BY id`, []any{log}
	if isAdmin(log) {
		q, args = qAdminRows+` ORDER BY id`, nil
	}
	var index uint64
	err = eachRow(ctx, c.db, "audit log", func(r row) error {
		id, rec, err := scanLogRow(r)
		if err != nil {
			return err
		}
		lr := LogRow{Index: index, ID: id, Leaf: Leaf(index, rec)}
		if index < uint64(len(tree)) {
			lr.Stored, lr.StoredID, lr.HasStored = tree[index].leaf, tree[index].rec, true
		}
		index++
		return fn(lr)
	}, q, args...)
	if err != nil {
		return err
	}
	for ; index < uint64(len(tree)); index++ {
		if err := fn(LogRow{Index: index, Stored: tree[index].leaf, StoredID: tree[index].rec, HasStored: true}); err != nil {
			return err
		}
	}
	return nil
}

// LogCheckpoint is the newest signed checkpoint of log (its note) and the
// size it covers; ErrNotFound when none was signed.
func (c *Catalog) LogCheckpoint(ctx context.Context, log []byte) (uint64, []byte, error) {
	var size int64
	var note string
	err := c.queryRow(ctx, `SELECT size, note FROM log_checkpoints WHERE log = ?`, log).Scan(&size, &note)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil, ErrNotFound
	}
	if err != nil {
		return 0, nil, fmt.Errorf("catalog: read the audit log's checkpoint: %w", err)
	}
	return uint64(size), []byte(note), nil
}

// LogCheckpoints is every log's newest checkpoint (its size and note),
// by log key.
func (c *Catalog) LogCheckpoints(ctx context.Context) (map[string]StoredCheckpoint, error) {
	out := map[string]StoredCheckpoint{}
	err := eachRow(ctx, c.db, "audit log checkpoints", func(r row) error {
		var log []byte
		var n int64
		var note string
		err := r.Scan(&log, &n, &note)
		out[string(log)] = StoredCheckpoint{uint64(n), []byte(note)}
		return err
	}, `SELECT log, size, note FROM log_checkpoints`)
	return out, err
}

// A StoredCheckpoint is a log's newest signed checkpoint.
type StoredCheckpoint struct {
	Size uint64
	Note []byte
}

// SetLogCheckpoint records note, a signed checkpoint of log over size
// records, as its newest, unless one over more records is there already
// (two signers racing keep the larger).
func (tx *Tx) SetLogCheckpoint(log []byte, size uint64, note []byte) error {
	_, err := tx.exec(`INSERT INTO log_checkpoints(log, size, note, at) VALUES (?, ?, ?, ?)
		ON CONFLICT(log) DO UPDATE SET size = excluded.size, note = excluded.note, at = excluded.at WHERE excluded.size >= log_checkpoints.size`,
		log, int64(size), string(note), nanos(tx.now))
	return err
}

// SyncLog makes every commit made so far durable, the notes' too (Note):
// an fsync of the write-ahead log covers every frame written to it. A
// checkpoint is signed only over records read before a SyncLog returned
// (docs/FORMAT.md, "Audit log tree"), never over a note a power cut could
// take back.
func (c *Catalog) SyncLog() error {
	err := durable.SyncFile(c.path + "-wal")
	if errors.Is(err, fs.ErrNotExist) {
		return nil // no log: every commit is in the database file, synced
	}
	if err != nil {
		return fmt.Errorf("catalog: sync the write-ahead log: %w", err)
	}
	return nil
}

// LogsRestored is what the newest restore kept of the logs it rebuilt
// (MetaLogRestored); nil when the catalog was never restored.
func (c *Catalog) LogsRestored(ctx context.Context) (*LogRestored, error) {
	b, err := c.Meta(ctx, MetaLogRestored)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r := &LogRestored{}
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("catalog: meta %s is damaged: %w", MetaLogRestored, err)
	}
	return r, nil
}

// logSpan is the span of indexes [lo, hi) of a tenant's log that holds its
// records stored at or after since and before until (zero times: no
// bound), and the id of its first node: found by a binary search of the
// records' times, which never decrease along a log (Tx.recordTime). A log
// an earlier release wrote while the clock went back (meta
// audit_unordered, migration 19) is read whole.
func (c *Catalog) logSpan(ctx context.Context, log []byte, since, until time.Time) (base int64, lo, hi uint64, err error) {
	num, err := logNum(c.rowQuerier(ctx), log)
	if err != nil {
		return 0, 0, 0, err
	}
	base, _ = nodeIDs(num)
	size, err := logSizeOf(c.rowQuerier(ctx), num)
	if err != nil || (since.IsZero() && until.IsZero()) {
		return base, 0, size, err
	}
	if _, err := c.Meta(ctx, "audit_unordered"); err == nil {
		return base, 0, size, nil
	} else if !errors.Is(err, ErrNotFound) {
		return 0, 0, 0, err
	}
	// first is the first index whose record's time is at or after t.
	first := func(t time.Time) uint64 {
		if t.IsZero() {
			return 0
		}
		return uint64(sort.Search(int(size), func(i int) bool {
			var at int64
			if err == nil {
				err = c.queryRow(ctx, `SELECT a.at FROM log_nodes n JOIN audit a ON a.id = n.rec WHERE n.id = ?`, base+int64(i)).Scan(&at)
			}
			return at >= nanos(t)
		}))
	}
	lo, hi = first(since), size
	if !until.IsZero() {
		hi = first(until)
	}
	if err != nil {
		return 0, 0, 0, fmt.Errorf("catalog: read the audit log's record times: %w (run vcon-server audit verify)", err)
	}
	return base, lo, hi, nil
}

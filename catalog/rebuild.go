package catalog

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/internal/durable"
)

// A catalog rebuilt from its replica (docs/FORMAT.md, "Restore"): the
// tables of the replica's schema filled with its rows, then its indexes,
// checked whole before anything opens it.

// Loader fills a catalog being rebuilt from a replica.
type Loader struct {
	ctx   context.Context
	tx    *sql.Tx
	stmts map[string]*sql.Stmt

	meta      map[string][]byte
	logFrom   int64
	record    func(schema string) ([]byte, error)
	adminLogs []Record
}

// MetaRestoreLoss is the meta key under which a restore that accepted a
// loss says which changes were lost, for the start after it to report
// (deleted with the mark Restored reads).
const MetaRestoreLoss = "restore_loss"

// SetMeta sets a meta value of the rebuilt catalog.
func (l *Loader) SetMeta(key string, value []byte) { l.meta[key] = value }

// AdminLog appends r to the rebuilt catalog's admin log, at the time of
// the restore.
func (l *Loader) AdminLog(r Record) { l.adminLogs = append(l.adminLogs, r) }

// Carry makes the rebuilt catalog carry on its replica: record, given
// the schema's fingerprint as the rebuilt file has it (View.Schema), is
// written as the replica's record once the indexes are made, and the
// change log goes on after logFrom.
func (l *Loader) Carry(logFrom int64, record func(schema string) ([]byte, error)) {
	l.logFrom, l.record = logFrom, record
}

// finish writes what Carry, SetMeta and AdminLog asked for.
func (l *Loader) finish() error {
	now := nanos(time.Now())
	// A replica made before the trees (migration 11) has no log tables,
	// one made before their nodes were numbered (migration 19) no logs
	// table: the first start, once migrated, makes the records that have
	// no leaf leaves (backfillLogs), the restore's own included.
	var nodes, logs int
	if err := l.tx.QueryRowContext(l.ctx, `SELECT count(*) FILTER (WHERE name = 'log_nodes'), count(*) FILTER (WHERE name = 'logs')
		FROM sqlite_master WHERE type = 'table'`).Scan(&nodes, &logs); err != nil {
		return err
	}
	trees := logs > 0
	if nodes > 0 {
		if err := l.noteLogSizes(now, trees); err != nil {
			return err
		}
	}
	if nodes > 0 && !trees {
		l.meta["log_backfill"] = []byte{1}
	}
	// Each row written here is noted in the change log once its sequence
	// goes on from the replica's, so that the next segment carries it:
	// a checkpoint over the restore's records (docs/FORMAT.md, "Audit
	// log tree") must never cover rows the replica lacks.
	var notes [][]any // table, then the row's key
	for k, v := range l.meta {
		if _, err := l.tx.ExecContext(l.ctx, `INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)`, k, v); err != nil {
			return err
		}
		notes = append(notes, []any{"meta", k})
	}
	raw := &rawTx{ctx: l.ctx, tx: l.tx, heads: map[string]logHead{}}
	for _, r := range l.adminLogs {
		res, err := l.tx.ExecContext(l.ctx, `INSERT INTO admin_log(at, actor, label, action, tenant, target, status) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			now, r.Actor, r.Label, r.Action, nullString(r.Tenant), nullString(r.Target), r.Status)
		if err != nil {
			return err
		}
		// The restore's records are leaves of the admin log as any are.
		id, err := res.LastInsertId()
		if err != nil {
			return err
		}
		r.Time = fromNanos(now)
		notes = append(notes, []any{"admin_log", id})
		if !trees {
			continue
		}
		if _, err := appendLeaf(raw, AdminLogID, id, r); err != nil {
			return err
		}
	}
	for _, id := range raw.nodes {
		notes = append(notes, []any{"log_nodes", id})
	}
	if h, ok := raw.heads[string(AdminLogID)]; ok {
		notes = append(notes, []any{"logs", h.num}) // numbered here, perhaps
	}
	if l.record == nil {
		return nil
	}
	_, fp, err := readSchema(l.ctx, l.tx)
	if err != nil {
		return err
	}
	rec, err := l.record(fp)
	if err != nil {
		return err
	}
	if _, err := l.tx.ExecContext(l.ctx, `INSERT OR REPLACE INTO replica_state(key, value) VALUES ('state', ?)`, rec); err != nil {
		return err
	}
	// A change number is never given twice (docs/FORMAT.md, "Replica"):
	// the log's sequence goes on from the replica's.
	if _, err := l.tx.ExecContext(l.ctx, `DELETE FROM sqlite_sequence WHERE name = 'replica_log'`); err != nil {
		return err
	}
	if _, err = l.tx.ExecContext(l.ctx, `INSERT INTO sqlite_sequence(name, seq) VALUES ('replica_log', ?)`, l.logFrom); err != nil {
		return err
	}
	for _, n := range notes {
		q := `INSERT INTO replica_log(tbl, k1) VALUES (?, ?)`
		if len(n) == 3 {
			q = `INSERT INTO replica_log(tbl, k1, k2) VALUES (?, ?, ?)`
		}
		if _, err := l.tx.ExecContext(l.ctx, q, n...); err != nil {
			return fmt.Errorf("catalog: note the restore's rows for the replica: %w", err)
		}
	}
	return nil
}

// MetaLogRestored is the meta key under which a restore keeps the size of
// each log it rebuilt, before its own records: a record the lost host
// made after the replica's last change is in no log, and an index from
// that size on handed out before the restore named it (check reports it;
// docs/FORMAT.md, "Audit log tree").
const MetaLogRestored = "log_restored"

// LogRestored is what MetaLogRestored holds.
type LogRestored struct {
	At    int64             `json:"at"`    // the restore's time, Unix nanoseconds
	Sizes map[string]uint64 `json:"sizes"` // by log key in hex
}

// noteLogSizes keeps each log's size in MetaLogRestored: numbered, the
// logs of migration 19 on; else those of a replica made before it.
func (l *Loader) noteLogSizes(at int64, numbered bool) error {
	r := LogRestored{At: at, Sizes: map[string]uint64{}}
	var sizes map[string]uint64
	var err error
	if numbered {
		sizes, err = logSizes(l.ctx, l.tx)
	} else {
		sizes = map[string]uint64{}
		err = eachRow(l.ctx, l.tx, "audit logs", func(rw row) error {
			var log []byte
			var n int64
			err := rw.Scan(&log, &n)
			sizes[string(log)] = uint64(n)
			return err
		}, `SELECT log, max(idx) + 1 FROM log_nodes GROUP BY log`)
	}
	if err != nil {
		return err
	}
	for log, n := range sizes {
		r.Sizes[hex.EncodeToString([]byte(log))] = n
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	l.meta[MetaLogRestored] = b
	return nil
}

// Put writes row (values for cols) into table, replacing the row with
// the same key.
func (l *Loader) Put(table string, cols []string, row []any) error {
	q := fmt.Sprintf(`INSERT OR REPLACE INTO %s(%s) VALUES (%s)`, quoteIdent(table), colList(cols), strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", "))
	return l.exec(q, row)
}

// Delete removes the row of table whose key columns hold key.
func (l *Loader) Delete(table string, keyCols []string, key []any) error {
	where := make([]string, len(keyCols))
	for i, k := range keyCols {
		where[i] = colList([]string{k}) + " = ?"
	}
	return l.exec(fmt.Sprintf(`DELETE FROM %s WHERE %s`, quoteIdent(table), strings.Join(where, " AND ")), key)
}

func (l *Loader) exec(q string, args []any) error {
	st, ok := l.stmts[q]
	if !ok {
		var err error
		if st, err = l.tx.PrepareContext(l.ctx, q); err != nil {
			return fmt.Errorf("catalog: restore: %w", err)
		}
		l.stmts[q] = st
	}
	if _, err := st.ExecContext(l.ctx, args...); err != nil {
		return fmt.Errorf("catalog: restore: %w", err)
	}
	return nil
}

// Build writes a new catalog file at path (which must not exist) from a
// replica: the tables of schema, the rows fill puts, then the indexes. The
// search indexes are left to be rebuilt (tokens are not carried), and the
// file is checked whole and synced before Build returns.
func Build(ctx context.Context, path string, schema []SchemaItem, fill func(*Loader) error) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("catalog: %s already exists", path)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	f.Close()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(0)&_pragma=journal_mode(DELETE)&_pragma=synchronous(FULL)")
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("catalog: restore: %w", err)
	}
	defer tx.Rollback()
	for _, it := range schema {
		if it.Type == "table" {
			if _, err := tx.ExecContext(ctx, it.SQL); err != nil {
				return fmt.Errorf("catalog: restore table %s: %w", it.Name, err)
			}
		}
	}
	l := &Loader{ctx: ctx, tx: tx, stmts: map[string]*sql.Stmt{}, meta: map[string][]byte{}}
	if err := fill(l); err != nil {
		return err
	}
	for _, st := range l.stmts {
		st.Close()
	}
	for _, it := range schema {
		if it.Type == "index" {
			if _, err := tx.ExecContext(ctx, it.SQL); err != nil {
				return fmt.Errorf("catalog: restore index %s: %w", it.Name, err)
			}
		}
	}
	if err := l.finish(); err != nil {
		return fmt.Errorf("catalog: restore: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM search_tokens; UPDATE tenants SET search_cursor = NULL, search_built = 0, search_key_check = NULL`); err != nil {
		return fmt.Errorf("catalog: restore: reset the search indexes: %w", err)
	}
	// The mark start-up recovery reads: every tombstone and every pack
	// file is looked at once (docs/FORMAT.md, "Restore").
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO meta(key, value) VALUES ('restored', X'01')`); err != nil {
		return fmt.Errorf("catalog: restore: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("catalog: restore: %w", err)
	}
	var ok string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		return fmt.Errorf("catalog: restore: the rebuilt catalog fails SQLite's integrity check: %v%s", err, ok)
	}
	var fk int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_foreign_key_check`).Scan(&fk); err != nil {
		return fmt.Errorf("catalog: restore: check the rebuilt catalog's foreign keys: %w", err)
	}
	if fk > 0 {
		return fmt.Errorf("catalog: restore: the rebuilt catalog has %d row(s) that name a missing row", fk)
	}
	if err := db.Close(); err != nil {
		return err
	}
	if err := durable.SyncFile(path); err != nil {
		return fmt.Errorf("catalog: restore: %w", err)
	}
	return nil
}

// FileKeyCheck reads the master key check value of the catalog file at
// path without opening it for writing (a restore's last check).
func FileKeyCheck(ctx context.Context, path string) ([]byte, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var check []byte
	if err := db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'key_check'`).Scan(&check); err != nil {
		return nil, fmt.Errorf("catalog: read the key check of %s: %w", path, err)
	}
	return check, nil
}

// Restored reports whether the catalog was rebuilt by a restore whose
// start-up recovery has not finished yet.
func (c *Catalog) Restored(ctx context.Context) (bool, error) {
	_, err := c.Meta(ctx, "restored")
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// ClearRestored drops the mark Restored reads, and the loss a restore
// accepted.
func (tx *Tx) ClearRestored() error {
	_, err := tx.exec(`DELETE FROM meta WHERE key IN ('restored', ?)`, MetaRestoreLoss)
	return err
}

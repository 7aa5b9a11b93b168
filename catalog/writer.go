package catalog

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"time"

	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/durable"
	"github.com/vcon-server/vcon-server/internal/reserve"
)

// One goroutine writes (docs/FORMAT.md, "Store"): it takes every call
// queued while the previous commit ran, runs each in a savepoint of one
// transaction, and commits them together, so one fsync of the log serves
// many requests (group commit).

const maxBatch = 256

// noteSync bounds how long a committed note (Note) may wait for the fsync
// that makes it survive a power cut.
const noteSync = time.Second

type writeReq struct {
	ctx  context.Context
	fn   func(*Tx) error
	err  chan error
	kind writeKind
}

// writeKind says what a write may skip.
type writeKind int

const (
	// general: any change, however many rows.
	general writeKind = iota
	// small: a change of one version and its records (UpdateSmall), a
	// few dozen pages at most, whose rollback journal may stay in memory.
	small
	// note: a record of a request that changed nothing (Note), small,
	// whose commit need not wait for an fsync of its own.
	note
)

// Update runs fn in a write transaction and returns once it is committed
// (durable: synchronous FULL) or failed. fn runs on the writer goroutine,
// inside a savepoint of a transaction it may share with other calls: an
// error from fn rolls back fn's work only. fn must do no I/O but SQL.
//
// A write refused for want of space is tried once more after the data
// directory's reserve is given back (internal/reserve): the commits that
// free space (retention changes, purges, audit records of refusals) must
// succeed on a full disk. fn may therefore run twice; it sets, never
// accumulates, what it reports.
func (c *Catalog) Update(ctx context.Context, fn func(*Tx) error) error {
	return c.write(ctx, fn, general)
}

// UpdateSmall runs fn as Update does, for a change of one version and its
// records (a store): a batch made only of such calls and notes keeps the
// journal that rolls one call back in memory, where SQLite otherwise
// writes each page a call changes to a temporary file first, about a
// quarter of a store's commit. A general call may change every row (a
// master-key rotation), so its batch keeps the file, bounded on disk.
func (c *Catalog) UpdateSmall(ctx context.Context, fn func(*Tx) error) error {
	return c.write(ctx, fn, small)
}

// Note runs fn as Update does, for a record of what changed nothing (the
// audit record of a read or of a refusal): it returns once the record is
// committed, seen by every reader and kept through a crash of the process,
// and the log holding it is synced within noteSync. A batch of notes alone
// commits without an fsync (synchronous NORMAL), which was most of a
// read's time on a disk whose fsync takes milliseconds; a power cut may
// lose the records of the last second's reads, never a change nor its
// record.
func (c *Catalog) Note(ctx context.Context, fn func(*Tx) error) error {
	return c.write(ctx, fn, note)
}

// UpdateSpare runs fn as Update does, but a write refused for want of
// space is refused, the reserve kept: for what may wait for room, such as
// an audit log's checkpoint (docs/FORMAT.md, "Audit log tree"), which
// must never spend the room a delete needs on a full disk.
func (c *Catalog) UpdateSpare(ctx context.Context, fn func(*Tx) error) error {
	return c.enqueue(ctx, fn, general)
}

func (c *Catalog) write(ctx context.Context, fn func(*Tx) error, kind writeKind) error {
	err := c.enqueue(ctx, fn, kind)
	if !reserve.IsFull(err) {
		return err
	}
	dir := filepath.Dir(c.path)
	if kind == note {
		// The record of what changed nothing frees no room later: it
		// takes a slice of the reserve, never the rest, which is the
		// deletes' (a refused store's record on a full disk took it all,
		// and serve could not start on that disk again).
		if c.noteRoom(dir) {
			err = c.enqueue(ctx, fn, kind)
		}
		return err
	}
	if _, rerr := reserve.Release(dir); rerr == nil {
		err = c.enqueue(ctx, fn, kind)
	}
	return err
}

// noteSlice is what a note refused for want of space takes of the
// reserve: a few dozen pages of the write-ahead log.
const noteSlice = 128 << 10

// noteRoom makes room for notes refused for want of space: a slice of the
// reserve once a commit, since the notes of one batch fail together.
func (c *Catalog) noteRoom(dir string) bool {
	c.noteMu.Lock()
	defer c.noteMu.Unlock()
	if n := c.commits.Load(); n == c.noteShrunkAt && c.noteShrunk {
		return true // this commit's slice is given already
	}
	freed, err := reserve.Shrink(dir, noteSlice)
	if err != nil || freed <= 0 {
		return false
	}
	c.noteShrunkAt, c.noteShrunk = c.commits.Load(), true
	return true
}

func (c *Catalog) enqueue(ctx context.Context, fn func(*Tx) error, kind writeKind) error {
	r := &writeReq{ctx: ctx, fn: fn, err: make(chan error, 1), kind: kind}
	select {
	case c.reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once queued, the write is waited for even if ctx ends: the caller must
	// know whether it committed.
	return <-r.err
}

// writer runs every write transaction. The log's sync mode and where
// temporary data goes are settings of a connection, changed outside
// transactions only: a batch of notes alone sets synchronous NORMAL, a
// batch with small writes and no general one temp_store MEMORY (notes
// change too few pages to fill the journal's memory), on the connection
// it takes from the pool, and both go back to the defaults before the
// connection does, so every other use of the pool (a checkpoint, a
// backup, the schema at open, a large sort) finds FULL and temporary
// files.
type writer struct {
	c *Catalog
	// unsynced: notes committed without an fsync since the last synced
	// commit; timer ends their wait.
	unsynced bool
	timer    *time.Timer
}

func (c *Catalog) writer() {
	w := &writer{c: c, timer: time.NewTimer(noteSync)}
	w.timer.Stop()
	defer func() {
		w.syncLog()
		close(c.done)
	}()
	for {
		var first *writeReq
		select {
		case r, ok := <-c.reqs:
			if !ok {
				return
			}
			first = r
		case <-w.timer.C:
			w.syncLog()
			continue
		}
		batch := []*writeReq{first}
	drain:
		for len(batch) < maxBatch {
			select {
			case r, ok := <-c.reqs:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		w.commitBatch(batch)
	}
}

// syncLog makes the notes committed without an fsync durable: an fsync of
// the log file covers every frame written to it, whichever descriptor
// wrote them.
func (w *writer) syncLog() {
	if !w.unsynced {
		return
	}
	w.timer.Stop()
	err := durable.SyncFile(w.c.path + "-wal")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		w.timer.Reset(noteSync) // tried again
		return
	}
	w.unsynced = false
	w.c.noteSyncs.Add(1)
}

func (w *writer) commitBatch(batch []*writeReq) {
	c := w.c
	errs := make([]error, len(batch))
	fail := func(err error) {
		for _, r := range batch {
			r.err <- err
		}
	}
	var has [note + 1]bool // by kind
	for _, r := range batch {
		has[r.kind] = true
	}
	full := has[general] || has[small]
	bg := context.Background()
	conn, err := c.db.Conn(bg)
	if err != nil {
		fail(fmt.Errorf("catalog: begin: %w", err))
		return
	}
	defer conn.Close()
	for _, s := range []struct {
		on           bool
		set, restore string
	}{
		{!full, "PRAGMA synchronous = NORMAL", "PRAGMA synchronous = FULL"},
		{has[small] && !has[general], "PRAGMA temp_store = MEMORY", "PRAGMA temp_store = DEFAULT"},
	} {
		if !s.on {
			continue
		}
		if _, err := conn.ExecContext(bg, s.set); err != nil {
			fail(fmt.Errorf("catalog: %s: %w", s.set, err))
			return
		}
		defer func() {
			if _, err := conn.ExecContext(bg, s.restore); err != nil {
				// A connection that cannot go back to the defaults is
				// not given back.
				conn.Raw(func(any) error { return driver.ErrBadConn })
			}
		}()
	}
	now := c.Now()
	heads, appended, err := runTx(c, conn, batch, errs, now)
	if errors.Is(err, errStaleHead) {
		// Another process appended to a log whose head this one kept
		// (docs/FORMAT.md, "Audit log tree"): the batch once more, every
		// head read from the rows. A call may run twice, as Update says.
		clear(c.heads)
		heads, appended, err = runTx(c, conn, batch, errs, now)
	}
	if err != nil {
		fail(err)
		return
	}
	c.commits.Add(1)
	maps.Copy(c.heads, heads)
	for _, a := range appended {
		a.to.note(a.heads)
	}
	// A synced commit that wrote frames syncs the notes before it too, but
	// whether it wrote any is not known here: the timer's one fsync a
	// second at most is cheaper than finding out.
	if !full && !w.unsynced {
		w.unsynced = true
		w.timer.Reset(noteSync)
	}
	for i, r := range batch {
		r.err <- errs[i]
	}
}

// runTx runs batch in a transaction of conn (runCalls) and commits it.
func runTx(c *Catalog, conn *sql.Conn, batch []*writeReq, errs []error, now time.Time) (map[string]logHead, []appendedCall, error) {
	sqlTx, err := conn.BeginTx(context.Background(), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("catalog: begin: %w", err)
	}
	heads, appended, err := runCalls(c, sqlTx, batch, errs, now)
	if err != nil {
		sqlTx.Rollback()
		return nil, nil, err
	}
	if err := sqlTx.Commit(); err != nil {
		return nil, nil, fmt.Errorf("catalog: commit: %w", err)
	}
	return heads, appended, nil
}

// runCalls runs each call of batch in a savepoint of sqlTx, its error in
// errs, then writes the audit log nodes of the calls that succeeded
// (flushNodes). It returns the logs' heads those calls left, for the
// catalog to keep once the batch commits, and the records they appended
// for requests that wait to name them (Appended); an error fails the
// batch.
func runCalls(c *Catalog, sqlTx *sql.Tx, batch []*writeReq, errs []error, now time.Time) (map[string]logHead, []appendedCall, error) {
	// One savepoint name serves every call: each is released before the
	// next starts, and a fixed text stays prepared (stmts.go).
	sp := &Tx{tx: sqlTx, c: c, ctx: context.Background(), now: now}
	heads := map[string]logHead{} // the logs' heads as the calls that succeeded left them
	var nodes []nodeRow           // and the nodes they appended
	var appended []appendedCall
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		if _, err := sp.exec("SAVEPOINT w"); err != nil {
			errs[i] = fmt.Errorf("catalog: savepoint: %w", err)
			continue
		}
		call := &Tx{tx: sqlTx, c: c, ctx: r.ctx, now: now, batch: heads}
		if errs[i] = r.fn(call); errs[i] == nil {
			for _, h := range call.heads {
				heads[h.log] = h.h
			}
			nodes = append(nodes, call.nodes...)
			if len(call.heads) > 0 {
				if a := appendedOf(r.ctx); a != nil {
					appended = append(appended, appendedCall{a, call.heads})
				}
			}
		} else if _, err := sp.exec("ROLLBACK TO w"); err != nil {
			return nil, nil, fmt.Errorf("catalog: rollback to savepoint: %w", err)
		}
		if _, err := sp.exec("RELEASE w"); err != nil {
			return nil, nil, fmt.Errorf("catalog: release savepoint: %w", err)
		}
	}
	if err := flushNodes(sp, nodes); err != nil {
		return nil, nil, err
	}
	if len(nodes) > 0 {
		crashpoint.Hit(crashpoint.LogAfterNodes)
	}
	return heads, appended, nil
}

// Commits counts the write batches this process committed: a cheap way
// for a poller to see that something may have changed.
func (c *Catalog) Commits() uint64 { return c.commits.Load() }

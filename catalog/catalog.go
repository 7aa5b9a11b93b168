package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/reserve"
	_ "modernc.org/sqlite"
)

// FileName is the catalog's name inside the data directory.
const FileName = "catalog.db"

var (
	// ErrNotFound is returned when the row asked for does not exist.
	ErrNotFound = errors.New("catalog: not found")
	// ErrMissing is returned by Open when the data directory has no catalog.
	ErrMissing = errors.New("catalog: no catalog in the data directory")
	// ErrFull is returned by Open when the disk refused the room the
	// catalog needs to open, the reserve spent (internal/reserve).
	ErrFull = errors.New("catalog: the data directory's disk is full and its reserve (space.reserve) is spent, and the catalog needs a little room to open (its shared-memory file, 32 KiB): free space on that disk (grow the file system, or remove files that are not vcon-server's), then start again")
)

// Catalog is an open catalog. Reads go straight to the pool; writes go
// through one goroutine that groups them into shared transactions (group
// commit: one fsync for many stores) with a savepoint each.
type Catalog struct {
	db   pool // reads prepared (stmts.go)
	path string
	ID   ids.ID // made by Create, never changes

	reqs chan *writeReq
	done chan struct{}

	commits      atomic.Uint64      // write batches committed by this process
	ckMu         sync.Mutex         // one checkpoint at a time
	checkpointed uint64             // 1 + the commits a finished checkpoint covers; 0: none ran (the WAL may hold an earlier process's writes)
	stmts        stmts              // the hot queries, prepared (stmts.go)
	noteSyncs    atomic.Uint64      // fsyncs of the log made for notes (writer.go)
	eraseTurn    sync.Mutex         // one erasure batch in the writer at a time (erasebatch.go)
	heads        map[string]logHead // the logs' heads, committed; the writer's alone (logtree.go)
	nodeArgs     []any              // flushNodes' arguments, reused; the writer's alone (lognodes.go)
	noteMu       sync.Mutex         // noteRoom's: the reserve's slice for notes on a full disk (writer.go)
	noteShrunkAt uint64             // the commit count when noteRoom last took a slice
	noteShrunk   bool
	// Now is the clock of every recorded time; tests replace it.
	Now func() time.Time
}

// Tx is a write transaction handed to the functions given to Update.
type Tx struct {
	tx  *sql.Tx
	c   *Catalog
	ctx context.Context
	now time.Time
	// auditIndex is the index of the last record appended (AuditIndex).
	auditIndex *uint64
	// heads are the logs this call appended to, batch its batch's
	// (catalog/logtree.go).
	heads []callHead
	batch map[string]logHead
	// nodes are the rows of log_nodes this call appended, written by
	// its batch before it commits.
	nodes []nodeRow
}

func dsn(path string) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(15000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "secure_delete(1)")
	q.Set("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

// Create makes the catalog in dataDir with a new catalog id and the master
// key's check value, or opens the one already there (init is idempotent).
// It reports whether it made a new one.
func Create(ctx context.Context, dataDir string, keyCheck []byte) (*Catalog, bool, error) {
	return CreateAs(ctx, dataDir, keyCheck, ids.ID{})
}

// CreateAs is Create with the id a new catalog gets (zero: a random one):
// a master key wrapped by a KMS is bound to its catalog's id, so init
// chooses the id before it makes the key (docs/keys.md).
func CreateAs(ctx context.Context, dataDir string, keyCheck []byte, id ids.ID) (*Catalog, bool, error) {
	path := filepath.Join(dataDir, FileName)
	_, err := os.Stat(path)
	existed := err == nil
	c, err := open(ctx, path)
	if err != nil {
		return nil, false, err
	}
	if existed {
		if err := c.loadID(ctx); err == nil {
			return c, false, nil
		}
	}
	if id.IsZero() {
		id = ids.NewRandom()
	}
	err = c.Update(ctx, func(tx *Tx) error {
		if _, err := tx.exec(`INSERT OR IGNORE INTO meta(key, value) VALUES ('catalog_id', ?), ('key_check', ?), ('key_move', 'done')`, id[:], keyCheck); err != nil {
			return err
		}
		return nil
	})
	if err == nil {
		err = c.loadID(ctx)
	}
	if err != nil {
		c.Close()
		return nil, false, err
	}
	return c, true, nil
}

// Open opens the catalog of dataDir; ErrMissing when init never ran there.
func Open(ctx context.Context, dataDir string) (*Catalog, error) {
	path := filepath.Join(dataDir, FileName)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, ErrMissing
	}
	return OpenFile(ctx, path)
}

// OpenFile opens the catalog file at path: one restore has just built,
// checked before it is put in place.
func OpenFile(ctx context.Context, path string) (*Catalog, error) {
	c, err := open(ctx, path)
	if err != nil {
		return nil, err
	}
	if err := c.loadID(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func open(ctx context.Context, path string) (*Catalog, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return nil, fmt.Errorf("catalog: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(8)
	// As many kept idle as may be open: a connection closed for want of
	// an idle slot (the default keeps 2) is opened again at the next burst,
	// reading the schema and preparing its statements anew.
	db.SetMaxIdleConns(8)
	db.SetConnMaxIdleTime(time.Minute)
	c := &Catalog{path: path, reqs: make(chan *writeReq, 256), done: make(chan struct{}), Now: time.Now, heads: map[string]logHead{}}
	c.db = pool{DB: db, c: c}
	err = c.migrate(ctx)
	if reserve.IsFull(err) {
		// The first to open a catalog makes its shared-memory file, which
		// a full disk refuses: the reserve gives it room (Update).
		if _, rerr := reserve.Release(filepath.Dir(path)); rerr == nil {
			err = c.migrate(ctx)
		}
	}
	if reserve.IsFull(err) {
		err = fmt.Errorf("%w: %w", ErrFull, err)
	}
	if err == nil {
		err = c.webhookTriggers(ctx)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	// The files hold wrapped keys: nobody but the service account reads them.
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		_ = os.Chmod(p, 0o600)
	}
	go c.writer()
	if err := c.backfillLogs(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Catalog) migrate(ctx context.Context) error {
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	defer conn.Close()
	var have int
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (n INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	err = conn.QueryRowContext(ctx, `SELECT n FROM schema_version`).Scan(&have)
	if errors.Is(err, sql.ErrNoRows) {
		have = 0
	} else if err != nil {
		return fmt.Errorf("catalog: read schema version: %w", err)
	}
	if have > len(migrations) {
		return fmt.Errorf("catalog: schema version %d is newer than this binary knows (%d): run the release that wrote it", have, len(migrations))
	}
	for n := have; n < len(migrations); n++ {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("catalog: migrate: %w", err)
		}
		if _, err := tx.ExecContext(ctx, migrations[n]); err != nil {
			tx.Rollback()
			return fmt.Errorf("catalog: migration %d: %w", n+1, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM schema_version; INSERT INTO schema_version(n) VALUES (?)`, n+1); err != nil {
			tx.Rollback()
			return fmt.Errorf("catalog: migration %d: %w", n+1, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("catalog: migration %d: %w", n+1, err)
		}
	}
	return nil
}

func (c *Catalog) loadID(ctx context.Context) error {
	var b []byte
	err := c.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'catalog_id'`).Scan(&b)
	if err != nil {
		return fmt.Errorf("catalog: read catalog id: %w", err)
	}
	copy(c.ID[:], b)
	return nil
}

// Path is the catalog file's path.
func (c *Catalog) Path() string { return c.path }

// LimitReaders caps the pool's connections besides the writer's (7 by
// default). Each connection keeps a page cache of its own (up to 2 MiB),
// which a process that streams the catalog once has no use for. A caller
// must never hold more than n results open at once.
func (c *Catalog) LimitReaders(n int) {
	c.db.SetMaxOpenConns(n + 1)
	c.db.SetMaxIdleConns(n + 1)
}

// DB gives read access for queries this package does not wrap.
func (c *Catalog) DB() *sql.DB { return c.db.DB }

// Close stops the writer and closes the database.
func (c *Catalog) Close() error {
	close(c.reqs)
	<-c.done
	c.closeStmts()
	return c.db.Close()
}

// Checkpoint copies the whole WAL into the database file and truncates the
// WAL to zero bytes, retrying while readers hold older snapshots, until ctx
// ends. With secure_delete on, a destroyed data key then survives in none of
// the catalog's files (docs/FORMAT.md, invariant 4).
//
// Concurrent callers share the work: a checkpoint that started after a
// caller's commits were made covers them, so the caller waits for that
// one instead of running its own.
func (c *Catalog) Checkpoint(ctx context.Context) error {
	want := c.commits.Load()
	c.ckMu.Lock()
	defer c.ckMu.Unlock()
	if c.checkpointed > want {
		return nil
	}
	start := c.commits.Load()
	if err := c.checkpoint(ctx); err != nil {
		return err
	}
	c.checkpointed = start + 1
	return nil
}

func (c *Catalog) checkpoint(ctx context.Context) error {
	delay := 5 * time.Millisecond
	for {
		var busy, logFrames, done int
		err := c.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logFrames, &done)
		if err == nil && busy == 0 && logFrames <= 0 {
			return nil
		}
		if reserve.IsFull(err) {
			// Copying the log into a file that must grow needs room: the
			// reserve's, tried again at once. Without one, waiting frees
			// nothing; the caller says the disk is full within moments,
			// not after its deadline.
			if n, _ := reserve.Release(filepath.Dir(c.path)); n > 0 {
				continue
			}
			return fmt.Errorf("catalog: checkpoint: %w", err)
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New("readers kept the log busy")
			}
			return fmt.Errorf("catalog: checkpoint: %w (%v)", ctx.Err(), err)
		case <-time.After(delay):
		}
		if delay < 200*time.Millisecond {
			delay *= 2
		}
	}
}

// Meta reads one meta value; ErrNotFound when absent.
func (c *Catalog) Meta(ctx context.Context, key string) ([]byte, error) {
	var v []byte
	err := c.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return v, err
}

// SetMeta records a meta value.
func (tx *Tx) SetMeta(key string, value []byte) error {
	_, err := tx.exec(`INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`, key, value)
	return err
}

// Now is the time of the transaction's batch.
func (tx *Tx) Now() time.Time { return tx.now }

func nanos(t time.Time) int64 { return t.UnixNano() }

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

func nullTime(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromNanos(n.Int64)
	return &t
}

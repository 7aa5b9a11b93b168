package catalog

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"sync/atomic"
)

// maxStmts bounds the statements kept prepared, and so their memory (each
// is prepared on up to every pool connection): the package's fixed
// queries (about 120) fit twice over, while a query built with a varying
// list of placeholders stops being kept once the bound is reached instead
// of growing the cache without end.
const maxStmts = 256

// stmts keeps each query the package runs often prepared, once per pool
// connection (database/sql prepares a *sql.Stmt lazily on each connection
// it runs on and reuses it there): reads and the writes of a store or an
// audit record no longer parse their SQL on every call. A prepared
// statement holds no snapshot between calls, so it caches no data.
type stmts struct {
	m       sync.Map // query text -> *sql.Stmt
	n       atomic.Int32
	pending sync.Map // query text -> true: being prepared for a transaction
	// preparing counts those preparations: Close waits for them, since
	// each holds a connection, and a connection left open after Close
	// would checkpoint its log into a catalog file restored in its place.
	preparing sync.WaitGroup
}

// stmt returns the prepared statement of q, or nil when q is not kept
// prepared (a schema change, the cache full, or a failed prepare, which
// the unprepared call then reports).
func (c *Catalog) stmt(ctx context.Context, q string) *sql.Stmt {
	if s, ok := c.stmts.m.Load(q); ok {
		return s.(*sql.Stmt)
	}
	if !cacheable(q) || c.stmts.n.Load() >= maxStmts {
		return nil
	}
	s, err := c.db.DB.PrepareContext(ctx, q)
	if err != nil {
		return nil
	}
	if old, loaded := c.stmts.m.LoadOrStore(q, s); loaded {
		s.Close()
		return old.(*sql.Stmt)
	}
	c.stmts.n.Add(1)
	return s
}

// cacheable leaves out the statements that run once or change the schema.
func cacheable(q string) bool {
	q = strings.TrimSpace(q)
	i := strings.IndexAny(q, " \t\n")
	if i < 0 {
		return false
	}
	switch strings.ToUpper(q[:i]) {
	case "SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "SAVEPOINT", "RELEASE", "ROLLBACK":
		return true
	}
	return false
}

func (c *Catalog) closeStmts() {
	c.stmts.preparing.Wait()
	c.stmts.m.Range(func(_, s any) bool {
		s.(*sql.Stmt).Close()
		return true
	})
}

// pool is the catalog's database whose reads go through the prepared
// statements: every c.db.QueryRowContext and c.db.QueryContext of the
// package is prepared once per connection, whichever file it is in.
// database/sql gives each open result a connection of its own, so one
// statement serves any number of them at once.
type pool struct {
	*sql.DB
	c *Catalog
}

func (p pool) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if s := p.c.stmt(ctx, q); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return p.DB.QueryRowContext(ctx, q, args...)
}

func (p pool) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if s := p.c.stmt(ctx, q); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return p.DB.QueryContext(ctx, q, args...)
}

// queryRow runs a one-row read on the pool, prepared.
func (c *Catalog) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	return c.db.QueryRowContext(ctx, q, args...)
}

// txStmt is the prepared statement of q for a write transaction, or nil.
// A statement not prepared yet is prepared beside it, for the next call:
// preparing takes a pool connection, which the writer goroutine must
// never wait for while it holds its own (a caller of Update may hold the
// others).
func (c *Catalog) txStmt(q string) *sql.Stmt {
	if s, ok := c.stmts.m.Load(q); ok {
		return s.(*sql.Stmt)
	}
	if cacheable(q) && c.stmts.n.Load() < maxStmts {
		if _, busy := c.stmts.pending.LoadOrStore(q, true); !busy {
			c.stmts.preparing.Add(1)
			go func() {
				defer c.stmts.preparing.Done()
				c.stmt(context.Background(), q)
				c.stmts.pending.Delete(q)
			}()
		}
	}
	return nil
}

// exec and queryRow run in the transaction's connection, through the
// statement the pool already prepared there when there is one. A read of
// several rows (eachRow on tx.tx) is left unprepared: its rows may stay
// open while the transaction runs other statements, and one statement
// cannot serve two open results on one connection.
func (tx *Tx) exec(q string, args ...any) (sql.Result, error) {
	if s := tx.c.txStmt(q); s != nil {
		return tx.tx.StmtContext(tx.ctx, s).ExecContext(tx.ctx, args...)
	}
	return tx.tx.ExecContext(tx.ctx, q, args...)
}

func (tx *Tx) queryRow(q string, args ...any) *sql.Row {
	if s := tx.c.txStmt(q); s != nil {
		return tx.tx.StmtContext(tx.ctx, s).QueryRowContext(tx.ctx, args...)
	}
	return tx.tx.QueryRowContext(tx.ctx, q, args...)
}

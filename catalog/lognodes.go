package catalog

import (
	"errors"
	"fmt"
	"strings"
)

// The writing of a batch's log_nodes rows (docs/FORMAT.md, "Audit log
// tree"): kept by each call, written by the batch before it commits.

// A nodeRow is a row of log_nodes.
type nodeRow struct {
	id     int64 // the log's number << idBits + the record's index
	rec    int64
	hashes []byte
}

// addNodes keeps n for the batch to write before it commits (flushNodes):
// one statement of many rows costs a record a fraction of its own insert.
func (tx *Tx) addNodes(n nodeRow) error {
	tx.nodes = append(tx.nodes, n)
	return nil
}

// nodeInserts[n] inserts n rows, for the counts flushNodes uses: 64, 32,
// 16, then the rest, 1 to 15 rows, in one statement. A batch of reads'
// records (a few to a dozen) is one insert; each text is kept prepared.
var nodeInserts = func() (q [65]string) {
	for n := range q {
		if n > 0 && (n <= 16 || n == 32 || n == 64) {
			q[n] = `INSERT INTO log_nodes(id, rec, hashes) VALUES (?, ?, ?)` + strings.Repeat(`, (?, ?, ?)`, n-1)
		}
	}
	return q
}()

// errStaleHead: a kept head was behind the rows, another process having
// appended since; the batch runs again (catalog/writer.go).
var errStaleHead = errors.New("catalog: another process appended to the audit log")

// sqliteConstraintPrimaryKey is SQLite's SQLITE_CONSTRAINT_PRIMARYKEY.
const sqliteConstraintPrimaryKey = 1555

// flushNodes writes the nodes of a batch's calls that succeeded, in the
// batch's transaction, before it commits (catalog/writer.go). A row whose
// id is taken was appended at a kept head another process has
// appended past: errStaleHead. Every head read from the rows is the true
// one, since the batch's transaction holds the write lock from its start.
func flushNodes(tx *Tx, rows []nodeRow) error {
	args := tx.c.nodeArgs[:0]
	defer func() { tx.c.nodeArgs = args[:0] }()
	for len(rows) > 0 {
		n := len(rows)
		switch {
		case n >= 64:
			n = 64
		case n >= 32:
			n = 32
		case n > 16:
			n = 16
		}
		args = args[:0]
		for _, r := range rows[:n] {
			args = append(args, r.id, r.rec, r.hashes)
		}
		_, err := tx.exec(nodeInserts[n], args...)
		clear(args) // holds no hashes past the batch
		if err != nil {
			if coded := interface{ Code() int }(nil); errors.As(err, &coded) && coded.Code() == sqliteConstraintPrimaryKey {
				return fmt.Errorf("%w: %w", errStaleHead, err)
			}
			return fmt.Errorf("catalog: append to the audit log: %w", err)
		}
		rows = rows[n:]
	}
	return nil
}

package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// The replica's side of the catalog (docs/FORMAT.md, "Replica"): triggers
// note in replica_log which rows every transaction changed, whoever made
// it (the server or a CLI command); the replica reads the log and the
// rows' current values in one read transaction and ships them sealed.
// The log holds keys only; replica_state holds the replica's own record.

// RepTable is a table the replica carries.
type RepTable struct {
	Name string   `json:"name"`
	Cols []string `json:"cols"` // read and written in this order; "rowid" first for a rowid table without an alias
	Key  []int    `json:"key"`  // the positions in Cols of the columns that name a row, in key order
}

// KeyOf returns the key of row, which has t.Cols.
func (t RepTable) KeyOf(row []any) []any {
	k := make([]any, len(t.Key))
	for i, p := range t.Key {
		k[i] = row[p]
	}
	return k
}

func (t RepTable) keyCols() []string {
	k := make([]string, len(t.Key))
	for i, p := range t.Key {
		k[i] = t.Cols[p]
	}
	return k
}

// SchemaItem is one table or index as sqlite_master writes it.
type SchemaItem struct {
	Type string `json:"type"`
	Name string `json:"name"`
	SQL  string `json:"sql"`
}

// maxKeyCols is the widest key replica_log can note (k1..k4).
const maxKeyCols = 4

// notCarried are tables whose rows a replica leaves out: its own, and the
// search tokens, which the indexer rebuilds from the vCons after a restore
// (their keys are random, so carrying them would rewrite every shard of
// them at each rollover).
func notCarried(name string) bool {
	return strings.HasPrefix(name, "replica_") || strings.HasPrefix(name, "sqlite_") || name == "search_tokens"
}

// repTables lists the carried tables with their columns and keys.
func repTables(ctx context.Context, q querier) ([]RepTable, error) {
	type tbl struct {
		name string
		wr   bool
	}
	var names []tbl
	err := eachRow(ctx, q, "the tables", func(r row) error {
		var t tbl
		if err := r.Scan(&t.name, &t.wr); err != nil {
			return err
		}
		if !notCarried(t.name) {
			names = append(names, t)
		}
		return nil
	}, `SELECT name, wr FROM pragma_table_list WHERE schema = 'main' AND type = 'table' ORDER BY name`)
	if err != nil {
		return nil, err
	}
	var out []RepTable
	for _, n := range names {
		t := RepTable{Name: n.name}
		pks := map[int]int{} // pk rank -> position
		err := eachRow(ctx, q, "the columns of "+n.name, func(r row) error {
			var name, typ string
			var pk int
			if err := r.Scan(&name, &typ, &pk); err != nil {
				return err
			}
			if pk > 0 {
				pks[pk] = len(t.Cols)
			}
			t.Cols = append(t.Cols, name)
			return nil
		}, `SELECT name, type, pk FROM pragma_table_info(?) ORDER BY cid`, n.name)
		if err != nil {
			return nil, err
		}
		alias := !n.wr && len(pks) == 1 && strings.EqualFold(colType(ctx, q, n.name, t.Cols[pks[1]]), "INTEGER")
		switch {
		case n.wr:
			for r := 1; r <= len(pks); r++ {
				t.Key = append(t.Key, pks[r])
			}
		case alias:
			t.Key = []int{pks[1]}
		default:
			t.Cols = append([]string{"rowid"}, t.Cols...)
			t.Key = []int{0}
		}
		if len(t.Key) == 0 || len(t.Key) > maxKeyCols {
			return nil, fmt.Errorf("catalog: table %s has a key of %d columns; the replica notes 1 to %d", n.name, len(t.Key), maxKeyCols)
		}
		out = append(out, t)
	}
	return out, nil
}

func colType(ctx context.Context, q querier, table, col string) string {
	var t string
	eachRow(ctx, q, "a column's type", func(r row) error {
		r.Scan(&t)
		return errStop
	}, `SELECT type FROM pragma_table_info(?) WHERE name = ?`, table, col)
	return t
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func colList(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = quoteIdent(c)
		if c == "rowid" {
			q[i] = "rowid"
		}
	}
	return strings.Join(q, ", ")
}

// EnableChangeLog (re)makes the triggers that fill replica_log, one set
// per carried table, so a table added by a later migration is covered.
func (c *Catalog) EnableChangeLog(ctx context.Context) error {
	return c.Update(ctx, func(tx *Tx) error {
		if err := dropTriggers(tx); err != nil {
			return err
		}
		tables, err := repTables(ctx, tx.tx)
		if err != nil {
			return err
		}
		for _, t := range tables {
			kc := t.keyCols()
			vals := func(row string) string {
				v := make([]string, len(kc))
				for i, k := range kc {
					if k == "rowid" {
						v[i] = row + ".rowid"
					} else {
						v[i] = row + "." + quoteIdent(k)
					}
				}
				return strings.Join(v, ", ")
			}
			ks := make([]string, len(kc))
			changed := make([]string, len(kc))
			for i, k := range kc {
				ks[i] = fmt.Sprintf("k%d", i+1)
				col := quoteIdent(k)
				if k == "rowid" {
					col = "rowid"
				}
				changed[i] = fmt.Sprintf("NEW.%s IS NOT OLD.%s", col, col)
			}
			into := fmt.Sprintf(`INSERT INTO replica_log(tbl, %s)`, strings.Join(ks, ", "))
			lit := "'" + t.Name + "'"
			name := quoteIdent(t.Name)
			stmts := []string{
				fmt.Sprintf(`CREATE TRIGGER "replica_%s_i" AFTER INSERT ON %s BEGIN %s VALUES (%s, %s); END`, t.Name, name, into, lit, vals("NEW")),
				fmt.Sprintf(`CREATE TRIGGER "replica_%s_d" AFTER DELETE ON %s BEGIN %s VALUES (%s, %s); END`, t.Name, name, into, lit, vals("OLD")),
				// A changed key notes the old key too: its row is gone.
				fmt.Sprintf(`CREATE TRIGGER "replica_%s_u" AFTER UPDATE ON %s BEGIN %s VALUES (%s, %s); %s SELECT %s, %s WHERE %s; END`,
					t.Name, name, into, lit, vals("NEW"), into, lit, vals("OLD"), strings.Join(changed, " OR ")),
			}
			for _, s := range stmts {
				if _, err := tx.exec(s); err != nil {
					return fmt.Errorf("catalog: replica trigger on %s: %w", t.Name, err)
				}
			}
		}
		return nil
	})
}

// DisableChangeLog drops the triggers and forgets the replica's log and
// state: serve without [replica] keeps no log that nothing reads.
func (c *Catalog) DisableChangeLog(ctx context.Context) error {
	return c.Update(ctx, func(tx *Tx) error {
		if err := dropTriggers(tx); err != nil {
			return err
		}
		_, err := tx.exec(`DELETE FROM replica_log; DELETE FROM replica_state`)
		return err
	})
}

func dropTriggers(tx *Tx) error {
	// Every name is read before the first drop: SQLite leaves undefined
	// what a read still open sees of the sqlite_master rows a drop removes.
	names, err := queryAll(tx.ctx, tx.tx, "replica triggers", func(r row) (string, error) {
		var n string
		err := r.Scan(&n)
		return n, err
	}, `SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'replica\_%' ESCAPE '\'`)
	if err != nil {
		return err
	}
	for _, n := range names {
		if _, err := tx.exec(`DROP TRIGGER ` + quoteIdent(n)); err != nil {
			return err
		}
	}
	return nil
}

// ReplicaState reads the replica's record and its progress since (nil
// when not written): the record changes at each rollover, the progress at
// each segment, so a segment rewrites a few bytes, not the shard list.
func (c *Catalog) ReplicaState(ctx context.Context) (state, progress []byte, err error) {
	err = eachRow(ctx, c.db, "the replica's state", func(r row) error {
		var k string
		var v []byte
		if err := r.Scan(&k, &v); err != nil {
			return err
		}
		if k == "state" {
			state = v
		} else {
			progress = v
		}
		return nil
	}, `SELECT key, value FROM replica_state WHERE key IN ('state', 'progress')`)
	if err != nil {
		return nil, nil, err
	}
	return state, progress, nil
}

// SetReplicaState replaces the replica's record, forgets its progress,
// and drops the log up to and including trim (none when trim is 0).
func (tx *Tx) SetReplicaState(state []byte, trim int64) error {
	if _, err := tx.exec(`INSERT OR REPLACE INTO replica_state(key, value) VALUES ('state', ?); DELETE FROM replica_state WHERE key = 'progress'`, state); err != nil {
		return err
	}
	if trim > 0 {
		if _, err := tx.exec(`DELETE FROM replica_log WHERE seq <= ?`, trim); err != nil {
			return err
		}
	}
	return nil
}

// ReplicaProgress reads the replica's progress in the transaction (nil:
// none since its record was written).
func (tx *Tx) ReplicaProgress() ([]byte, error) {
	var v []byte
	err := tx.queryRow(`SELECT value FROM replica_state WHERE key = 'progress'`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return v, err
}

// SetReplicaProgress records how far the replica's segments reach.
func (tx *Tx) SetReplicaProgress(progress []byte) error {
	_, err := tx.exec(`INSERT OR REPLACE INTO replica_state(key, value) VALUES ('progress', ?)`, progress)
	return err
}

// LastChange is the log's newest sequence number ever given (0: none).
func (c *Catalog) LastChange(ctx context.Context) (int64, error) {
	return lastChange(ctx, c.db)
}

type rowQuerier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

func lastChange(ctx context.Context, q rowQuerier) (int64, error) {
	var n int64
	err := q.QueryRowContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name = 'replica_log'`).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// Secrets names, per table, the column whose clearing must reach every
// copy: a version's wrapped data key, destroyed by a purge, and a
// tenant's wrapped key, whose row a tenant's delete deletes. A replica
// rewrites what held a cleared one (docs/FORMAT.md, "Replica rollover").
var Secrets = map[string]string{"versions": "wrapped_key", "tenant_keys": "wrapped"}

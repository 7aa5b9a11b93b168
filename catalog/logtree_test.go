package catalog

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/translog"
)

// TestLeafIsJSON holds Leaf's fast path to encoding/json's bytes.
func TestLeafIsJSON(t *testing.T) {
	at := time.Date(2026, 12, 1, 23, 50, 19, 120000000, time.UTC)
	for _, r := range []Record{
		{Time: at, Actor: "key:ab", Label: "ingest", Action: "store", Target: "019ad2c4-7a1e-7cc3-9a55-3d2f1e0b7c11", Status: 201},
		{Time: at, Actor: "server", Label: "retention", Action: "purge", Target: "019ad2c4-7a1e-7cc3-9a55-3d2f1e0b7c11", Status: 200},
		{Time: at, Tenant: "t", Actor: "cli", Action: "tenant_create", Status: 200},
		{Time: at, Actor: "key:ab", Label: `a "label" <b> & ü \ ` + "\x01", Action: "read", Status: 404},
	} {
		want, _ := json.Marshal(leafJSON{Index: 7, Time: r.Time.Format(time.RFC3339Nano), Tenant: r.Tenant, Actor: r.Actor,
			Label: r.Label, Action: r.Action, Lifecycle: Lifecycle(r), Target: r.Target, Status: r.Status})
		if got := Leaf(7, r); string(got) != string(want) || (r.Status == 201 && !strings.Contains(string(got), `"lifecycle":"vcon_created"`)) {
			t.Errorf("Leaf %s, encoding/json %s", got, want)
		}
	}
}

// TestAuditTimeRanges: a record stored while the clock went back takes
// its predecessor's time, so a log's times never decrease and a time
// range is a span of its indexes; the ranges read what a filter of the
// whole log keeps, in index order, and a log noted audit_unordered is
// read whole.
func TestAuditTimeRanges(t *testing.T) {
	ctx := context.Background()
	c, tn := withTenant(t, t.TempDir())
	base := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	// Seconds from base of each record's clock: steps back twice.
	clock := []int{0, 1, 1, 2, 5, 3, 4, 6, 7, 7, 2, 9, 10}
	for i, s := range clock {
		c.Now = func() time.Time { return base.Add(time.Duration(s) * time.Second) }
		if err := c.Audit(ctx, tn.ID, Record{Actor: "cli", Action: "read", Target: strconv.Itoa(i), Status: 200}); err != nil {
			t.Fatal(err)
		}
	}
	var all []Record
	if err := c.AuditRecords(ctx, tn.ID, time.Time{}, time.Time{}, func(r Record) error { all = append(all, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(all) != len(clock) {
		t.Fatalf("%d records, want %d", len(all), len(clock))
	}
	for i, r := range all {
		want := clock[i]
		for _, s := range clock[:i] {
			want = max(want, s)
		}
		if r.Target != strconv.Itoa(i) || !r.Time.Equal(base.Add(time.Duration(want)*time.Second)) {
			t.Errorf("record %d: target %s at %v, want at +%ds", i, r.Target, r.Time, want)
		}
	}
	check := func(unordered bool) {
		t.Helper()
		for lo := -1; lo <= 11; lo++ {
			for hi := lo; hi <= 12; hi++ {
				since, until := base.Add(time.Duration(lo)*time.Second), base.Add(time.Duration(hi)*time.Second)
				if lo == -1 {
					since = time.Time{}
				}
				if hi == 12 {
					until = time.Time{}
				}
				var want, got []string
				for _, r := range all {
					if (since.IsZero() || !r.Time.Before(since)) && (until.IsZero() || r.Time.Before(until)) {
						want = append(want, r.Target)
					}
				}
				if err := c.AuditRecords(ctx, tn.ID, since, until, func(r Record) error { got = append(got, r.Target); return nil }); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Errorf("unordered %v, [+%ds, +%ds): %v, want %v", unordered, lo, hi, got, want)
				}
			}
		}
	}
	check(false)
	// A log an earlier release wrote while the clock went back, as
	// migration 19 finds it (its end, logTreesMigration).
	if _, err := c.db.Exec(`UPDATE audit SET at = at - 3000000000 WHERE target = '6'; CREATE INDEX audit_by_tenant ON audit (tenant, at)`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.db.Exec(logTreesMigration); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Meta(ctx, "audit_unordered"); err != nil {
		t.Fatalf("migration 19 did not note the log unordered: %v", err)
	}
	all = all[:0]
	if err := c.AuditRecords(ctx, tn.ID, time.Time{}, time.Time{}, func(r Record) error { all = append(all, r); return nil }); err != nil {
		t.Fatal(err)
	}
	check(true)
}

// TestMigration19: a catalog whose log_nodes rows were keyed by log and
// index gets them numbered, every leaf and node kept, its change log's
// notes of nodes renamed, and appends go on at each log's end.
func TestMigration19(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tn, before, db := release18(t, dir, 40)
	_, err := db.Exec(`INSERT INTO replica_log(tbl, k1, k2) VALUES ('log_nodes', ?, 7)`, tn.ID[:])
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	after, err := c.LogSizes(ctx)
	if err != nil || !maps.Equal(before, after) {
		t.Fatalf("sizes %v before, %v after (%v)", before, after, err)
	}
	if err := c.Audit(ctx, tn.ID, Record{Actor: "cli", Action: "read", Target: "40", Status: 200}); err != nil {
		t.Fatal(err)
	}
	if n := checkLeaves(t, c, LogID(tn.ID)); n != before[string(LogID(tn.ID))]+1 {
		t.Errorf("the tenant's log holds %d records, want %d", n, before[string(LogID(tn.ID))]+1)
	}
	if n := checkLeaves(t, c, AdminLogID); n != before[string(AdminLogID)] {
		t.Errorf("the admin log holds %d records, want %d", n, before[string(AdminLogID)])
	}
	num, err := logNum(c.rowQuerier(ctx), LogID(tn.ID))
	if err != nil {
		t.Fatal(err)
	}
	var k1 int64
	if err := c.db.QueryRow(`SELECT k1 FROM replica_log WHERE tbl = 'log_nodes' AND k2 IS NULL`).Scan(&k1); err != nil || k1 != num<<idBits+7 {
		t.Errorf("the change log's note of node 7: %d (%v), want %d", k1, err, num<<idBits+7)
	}
	if _, err := c.Meta(ctx, "audit_unordered"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a log in time order noted unordered (%v)", err)
	}
}

// TestRestoreBeforeMigration19: a catalog rebuilt from a replica whose
// log_nodes rows were keyed by log and index leaves its restore's own
// record to the first start, which migrates the nodes and then appends
// it, so that every leaf matches its row.
func TestRestoreBeforeMigration19(t *testing.T) {
	ctx := context.Background()
	_, before, db := release18(t, t.TempDir(), 0)
	defer db.Close()
	schema, _, err := readSchema(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	rebuilt := filepath.Join(t.TempDir(), FileName)
	err = Build(ctx, rebuilt, schema, func(l *Loader) error {
		for _, it := range schema {
			if it.Type != "table" || strings.HasPrefix(it.Name, "replica_") {
				continue
			}
			rows, err := db.Query(`SELECT * FROM ` + quoteIdent(it.Name))
			if err != nil {
				return err
			}
			cols, _ := rows.Columns()
			for rows.Next() {
				row := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range row {
					ptrs[i] = &row[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					return err
				}
				if err := l.Put(it.Name, cols, row); err != nil {
					return err
				}
			}
			rows.Close()
		}
		l.AdminLog(Record{Actor: "cli", Action: "catalog_restore", Status: 200})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := OpenFile(ctx, rebuilt)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n := checkLeaves(t, c, AdminLogID); n != before[string(AdminLogID)]+1 {
		t.Errorf("the admin log holds %d records, want %d", n, before[string(AdminLogID)]+1)
	}
	restored, err := c.LogsRestored(ctx)
	if err != nil || restored == nil || restored.Sizes[hex.EncodeToString(AdminLogID)] != before[string(AdminLogID)] {
		t.Errorf("log_restored %+v (%v), want the admin log at %d", restored, err, before[string(AdminLogID)])
	}
}

// release18 makes in dir a catalog with a tenant and that many records of
// its, then gives it the shape release 18 left it in: log_nodes keyed by
// log and index, no logs table, audit_by_tenant, schema version 18. It
// returns the tenant, each log's size, and the file opened raw.
func release18(t *testing.T, dir string, records int) (Tenant, map[string]uint64, *sql.DB) {
	t.Helper()
	ctx := context.Background()
	c, _, err := Create(ctx, dir, masterKey(t, 1).CheckValue())
	if err != nil {
		t.Fatal(err)
	}
	var tn Tenant
	if err := c.Update(ctx, func(tx *Tx) (err error) { tn, err = tx.CreateTenant("acme"); return err }); err != nil {
		t.Fatal(err)
	}
	for i := range records {
		if err := c.Audit(ctx, tn.ID, Record{Actor: "cli", Action: "read", Target: strconv.Itoa(i), Status: 200}); err != nil {
			t.Fatal(err)
		}
	}
	sizes, err := c.LogSizes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", dsn(filepath.Join(dir, FileName)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`CREATE TABLE old (log BLOB NOT NULL, idx INTEGER NOT NULL, rec INTEGER NOT NULL, hashes BLOB NOT NULL, PRIMARY KEY (log, idx)) WITHOUT ROWID;
		INSERT INTO old SELECT l.log, n.id - (l.num << 40), n.rec, n.hashes FROM log_nodes n JOIN logs l ON n.id >> 40 = l.num;
		DROP TABLE log_nodes; DROP TABLE logs; ALTER TABLE old RENAME TO log_nodes;
		CREATE INDEX audit_by_tenant ON audit (tenant, at);
		UPDATE schema_version SET n = 18`)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	return tn, sizes, db
}

// checkLeaves holds every record of log to the leaf the tree keeps for its
// row, and returns how many records the log has.
func checkLeaves(t *testing.T, c *Catalog, log []byte) uint64 {
	t.Helper()
	var n uint64
	err := c.LogRows(context.Background(), log, func(r LogRow) error {
		if !r.HasStored || r.ID == 0 || r.StoredID != r.ID || r.Stored != translog.LeafHash(r.Leaf) {
			t.Errorf("log %x record %d: row %d, stored %v for row %d", log, r.Index, r.ID, r.HasStored, r.StoredID)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

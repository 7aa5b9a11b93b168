package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
)

// planCase is one query whose plan TestPlans checks, with representative
// arguments, and the first step of the plan it must have: the range of
// the index it reads.
type planCase struct {
	name  string // the constant that holds q, or a name for the test
	q     string
	args  []any
	reads string
}

// planCases lists every paged query (a LIMIT and a cursor, or a scan that
// pages) and the other scans that grow with the catalog: each is a range
// read of an index in the order it pages (docs/FORMAT.md, "Indexes").
func planCases(f *planFixture) []planCase {
	t, mid := f.tenant[:], f.mid[:]
	day := nanos(f.day)
	return []planCase{
		{"qKept", qKept, []any{t, mid, pageSize},
			"SEARCH v USING INDEX versions_by_tenant (tenant=? AND id>?)"},
		{"qAt", qAt, []any{string(InDir), t, day, mid, pageSize},
			"SEARCH v USING INDEX versions_by_location (location=? AND (tenant,stored_at,id)>(?,?,?))"},
		{"qExport", qExport, []any{t, mid, f.newest[:], day, day + int64(48*time.Hour), 500},
			"SEARCH v USING INDEX versions_by_tenant (tenant=? AND id>? AND id<?)"},
		{"qCurrent", qCurrent, []any{t, f.midUUID[:], 100},
			"SEARCH vcons USING PRIMARY KEY (tenant=? AND uuid>?)"},
		{"qDue", qDue, []any{f.due.hiddenAt, f.due.id[:], nanos(f.now), int64(30 * 24 * time.Hour), int64(30 * 24 * time.Hour), nanos(f.now), 500},
			"SEARCH v USING INDEX versions_hidden ((hidden_at,id)>(?,?) AND hidden_at<?)"},
		{"qPackable", qPackable, []any{string(InS3), t, day, mid, day + int64(24*time.Hour), int64(1 << 20), 1 << 20},
			"SEARCH versions USING INDEX versions_by_location (location=? AND tenant=? AND (stored_at,id)>(?,?) AND stored_at<?)"},
		{"qOldestPackable", qOldestPackable, []any{string(InS3), t, day, int64(1 << 20)},
			"SEARCH versions USING INDEX versions_by_location (location=? AND tenant=? AND stored_at>?)"},
		{"qLivePacked", qLivePacked, []any{string(Packed), t, mid, 1000},
			"SEARCH v USING INDEX versions_by_tenant (tenant=? AND id>?)"},
		{"qDelTokens", qDelTokens, []any{t, 5000},
			"SEARCH search_tokens USING COVERING INDEX search_tokens_by_version (version=?)"},
		{"qDelAudit", qDelAudit, []any{t, 5000},
			"SEARCH audit USING INTEGER PRIMARY KEY (rowid=?)"},
		{"qDelLogNodes", qDelLogNodes, []any{t, 5000},
			"SEARCH log_nodes USING INTEGER PRIMARY KEY (rowid=?)"},
		{"qDelEvents", qDelEvents, []any{t, 5000},
			"SEARCH webhook_events USING INTEGER PRIMARY KEY (rowid=?)"},
		{"qDelVersions", qDelVersions, []any{t, 5000},
			"SEARCH versions USING PRIMARY KEY (id=?)"},
		{"qDelVcons", qDelVcons, []any{t, 5000},
			"SEARCH vcons USING PRIMARY KEY (tenant=? AND uuid=?)"},
		{"qUnmoved", qUnmoved, []any{mid, pageSize},
			"SEARCH versions USING PRIMARY KEY (id>?)"},
		{"searchQuery(1)", searchQuery(1), []any{t, f.shared[:], f.midUUID[:], 51},
			"SEARCH s USING PRIMARY KEY (tenant=? AND token=? AND uuid>?)"},
		{"searchQuery(3)", searchQuery(3), []any{t, f.shared[:], f.midUUID[:], f.shared[:], f.own[:], 51},
			"SEARCH s USING PRIMARY KEY (tenant=? AND token=? AND uuid>?)"},
		{"qAuditSpan", qAuditSpan, []any{int64(1<<idBits + 10), int64(1<<idBits + 20), day, day + int64(24*time.Hour), day, 0, 1000},
			"SEARCH n USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)"},
		{"qLogLast", qLogLast, []any{int64(1 << idBits), int64(2 << idBits)},
			"SEARCH log_nodes USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)"},
		{"qLogSizes", qLogSizes, nil,
			"SCAN logs"},
		{"qAdminLog", qAdminLog, []any{day, day + int64(24*time.Hour), day, 0, 1000},
			"SEARCH admin_log USING INDEX admin_log_by_time (at>? AND at<?)"},
		{"qNewest", qNewest, []any{t},
			"SEARCH versions USING COVERING INDEX versions_by_tenant (tenant=?)"},
		{"qErasedFirst", qErasedFirst, []any{mid, 1001},
			"SEARCH erased USING PRIMARY KEY (erasure=?)"},
		{"qErasedAfter", qErasedAfter, []any{mid, f.midUUID[:], 1001},
			"SEARCH erased USING PRIMARY KEY (erasure=? AND uuid>?)"},
		{"qNextBatch", qNextBatch, []any{mid},
			"SEARCH erase_todo USING INDEX sqlite_autoindex_erase_todo_1 (erasure=?)"},
		{"qDueEvents", qDueEvents, []any{f.mid[:], tenantsEnd, nanos(f.now), 4, 64},
			"SEARCH w USING PRIMARY KEY (tenant>? AND tenant<?)"},
		{"qSigned", qSigned, []any{t, mid, 1000},
			"SEARCH versions USING INDEX versions_by_tenant (tenant=? AND id>?)"},
		{"qExpired", qExpired, []any{t, nanos(f.now), 250},
			"SEARCH v USING INDEX versions_lawful_expires (tenant=? AND lawful_expires>? AND lawful_expires<?)"},
		{"qExpiredTenants", qExpiredTenants, []any{nanos(f.now)},
			"SCAN tenants"},
		{"qNextExpiry", qNextExpiry, []any{t},
			"SEARCH v USING INDEX versions_lawful_expires (tenant=? AND lawful_expires>?)"},
		// Lookups that no index dropped by migration 10 may turn into a
		// scan: the store's, and those of the rows it wrote.
		{"qReplay", qReplay, []any{t, f.midUUID[:], []byte("mac"), "application/vcon", ""},
			"SEARCH c USING PRIMARY KEY (tenant=? AND uuid=?)"},
		{"qVersions", qVersions, []any{t, f.midUUID[:]},
			"SEARCH v USING INDEX versions_by_uuid (tenant=? AND uuid=?)"},
		{"qUncurrent", qUncurrent, []any{mid},
			"SEARCH vcons USING PRIMARY KEY (tenant=? AND uuid=?)"},
	}
}

// TestPlans checks each query's plan, on a new catalog and on one made by
// the first release and migrated; without sqlite_stat1, as the server runs
// (it never runs ANALYZE), and again after ANALYZE, so that statistics
// would not change the plans either. A plan fails when it sorts (a temp
// B-tree) or scans a table but tenants, or starts anywhere but the range
// its case names.
func TestPlans(t *testing.T) {
	for _, migrated := range []bool{false, true} {
		t.Run(fmt.Sprintf("migrated=%v", migrated), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			if migrated {
				firstRelease(t, dir)
			}
			c, _, err := Create(ctx, dir, masterKey(t, 1).CheckValue())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			f := fillPlans(t, c)
			for _, analyzed := range []bool{false, true} {
				if analyzed {
					if _, err := c.DB().Exec(`ANALYZE`); err != nil {
						t.Fatal(err)
					}
				}
				for _, p := range planCases(f) {
					plan := explain(t, c.DB(), p.q, p.args)
					if msg := badPlan(plan, p.reads); msg != "" {
						t.Errorf("%s (ANALYZE: %v): %s; the plan:\n%s", p.name, analyzed, msg, strings.Join(plan, "\n"))
					}
					// The query runs with these arguments.
					rows, err := c.DB().Query(p.q, p.args...)
					if err != nil {
						t.Fatalf("%s: %v", p.name, err)
					}
					rows.Close()
				}
			}
		})
	}
}

func explain(t *testing.T, db *sql.DB, q string, args []any) []string {
	t.Helper()
	rows, err := db.Query(`EXPLAIN QUERY PLAN `+q, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", q, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}

// badPlan says what is wrong with a plan, or "".
func badPlan(plan []string, reads string) string {
	for _, step := range plan {
		switch {
		case strings.Contains(step, "TEMP B-TREE"):
			return "it sorts: " + step
		case strings.HasPrefix(step, "SCAN ") && step != "SCAN tenants" && step != "SCAN logs": // a row a tenant
			return "it scans: " + step
		}
	}
	for _, step := range plan {
		if strings.HasPrefix(step, "SEARCH ") || strings.HasPrefix(step, "SCAN ") {
			if step != reads {
				return "it starts with " + step + ", not " + reads
			}
			return ""
		}
	}
	return "it reads no table"
}

// TestPlansCoverPagedQueries holds every query of the package that has a
// LIMIT to a constant (or searchQuery) that planCases checks, so that no
// paged query escapes TestPlans.
func TestPlansCoverPagedQueries(t *testing.T) {
	checked := map[string]bool{"searchQuery": true}
	for _, p := range planCases(&planFixture{}) {
		checked[p.name] = true
	}
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "logtrees_off.go" {
			continue // tests, and the trees' benchmark baseline, never released
		}
		file, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		// owner is the constant or function a literal belongs to.
		var owner func(pos token.Pos) string
		owner = func(pos token.Pos) string {
			for _, d := range file.Decls {
				if pos < d.Pos() || pos >= d.End() {
					continue
				}
				switch d := d.(type) {
				case *ast.FuncDecl:
					return d.Name.Name
				case *ast.GenDecl:
					for _, s := range d.Specs {
						if vs, ok := s.(*ast.ValueSpec); ok && d.Tok == token.CONST && pos >= vs.Pos() && pos < vs.End() {
							return vs.Names[0].Name
						}
					}
				}
			}
			return ""
		}
		ast.Inspect(file, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, _ := strconv.Unquote(lit.Value)
			if strings.Contains(strings.ToUpper(s), "LIMIT") {
				if o := owner(lit.Pos()); !checked[o] {
					t.Errorf("%s: a query with a LIMIT in %s, which planCases does not check: make it a constant and add it there", fset.Position(lit.Pos()), o)
				}
			}
			return true
		})
	}
}

// planFixture is a catalog of several tenants and a few hundred versions,
// and the arguments the plan test gives its queries.
type planFixture struct {
	tenant      ids.ID    // the tenant asked about
	mid, newest ids.ID    // a version id of it half way, and its newest
	midUUID     ids.ID    // a uuid of it half way
	day         time.Time // a day it stored versions on
	now         time.Time
	due         DueCursor // half way through its hidden versions
	shared, own [16]byte  // tokens: of every version, and of one
}

// fillPlans stores, for each of 4 tenants, 120 versions over 5 days in the
// data directory and in the bucket: new vCons and replacements, some
// deleted, held, purging or packed, with search tokens and audit records.
func fillPlans(t *testing.T, c *Catalog) *planFixture {
	t.Helper()
	ctx := context.Background()
	start := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	clock := start
	c.Now = func() time.Time { return clock }
	f := &planFixture{day: start.AddDate(0, 0, 2), shared: [16]byte{1}, own: [16]byte{2, 60}}
	for ti := range 4 {
		var tenant Tenant
		err := c.Update(ctx, func(tx *Tx) error {
			var err error
			if tenant, err = tx.CreateTenant("plans-" + strconv.Itoa(ti)); err != nil {
				return err
			}
			if ti == 1 {
				days := 7
				return tx.SetTenantRetention(tenant.ID, &days)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// Every change of tenants 0 to 2 is an outbox event.
		if ti < 3 {
			if err := c.SetWebhook(ctx, Webhook{Tenant: tenant.ID, URL: "https://example.com/h", Secret: []byte("sealed")}, CLI); err != nil {
				t.Fatal(err)
			}
		}
		var uuids []ids.ID
		var made []Version
		for i := range 120 {
			clock = start.Add(time.Duration(i) * time.Hour)
			v := Version{ID: ids.NewV7(clock), Tenant: tenant.ID, StoredAt: clock, ContentType: "application/vcon",
				Form: "unsigned", Size: 100, SealedSize: 150, WrappedKey: []byte("wrapped"), Location: InDir}
			if i%2 == 1 {
				v.Location = InS3
			}
			mode := CreateOnly
			if i%4 == 3 {
				v.UUID, mode = uuids[i/2], Replace
			} else {
				v.UUID = ids.NewRandom()
				uuids = append(uuids, v.UUID)
			}
			err := c.Update(ctx, func(tx *Tx) error {
				if _, err := tx.InsertVersion(v, mode); err != nil {
					return err
				}
				if err := tx.AddTokens(tenant.ID, v.ID, [][16]byte{f.shared, {2, byte(i)}}); err != nil {
					return err
				}
				switch i % 10 {
				case 5:
					if _, err := tx.Hide(v.Tenant, v.UUID); err != nil && !errors.Is(err, ErrHeld) {
						return err
					}
				case 6:
					if err := tx.SetHold(v.Tenant, v.UUID, true); err != nil {
						return err
					}
				case 8:
					if _, err := tx.DestroyKeyOf(v.ID); err != nil {
						return err
					}
				}
				return tx.Audit(tenant.ID, Record{Actor: "key:plans", Action: "vcon_create", Target: v.UUID.String(), Status: 201})
			})
			if err != nil {
				t.Fatal(err)
			}
			made = append(made, v)
		}
		// The bucket's objects of the first day go into a pack file.
		pack := PackFile{ID: ids.NewV7(clock), Tenant: tenant.ID, Date: start.Format(time.DateOnly), Key: "parquet/" + strconv.Itoa(ti)}
		var moved []MovedRow
		for _, v := range made[:24] {
			if v.Location == InS3 {
				moved = append(moved, MovedRow{Version: v.ID, Offset: int64(len(moved)) * 150, Length: 150})
			}
		}
		err = c.Update(ctx, func(tx *Tx) error {
			if err := tx.AddPendingPack(pack); err != nil {
				return err
			}
			if err := tx.CommitPack(pack.ID, int64(len(moved))*150, moved); err != nil {
				return err
			}
			return tx.AdminLog(Record{Actor: "cli", Action: "pack", Tenant: tenant.ID.String(), Status: 200})
		})
		if err != nil {
			t.Fatal(err)
		}
		if ti == 2 {
			f.tenant, f.mid, f.newest, f.midUUID = tenant.ID, made[60].ID, made[len(made)-1].ID, uuids[len(uuids)/2]
		}
	}
	f.now = clock.AddDate(0, 1, 0)
	hidden, next, err := c.PurgeDue(ctx, 0, f.now, DueCursor{}, 20)
	if err != nil || len(hidden) != 20 {
		t.Fatalf("the fixture has %d purges due (%v)", len(hidden), err)
	}
	f.due = next
	return f
}

// firstRelease makes, in dir, a catalog as the first releases left it
// (schema version 2) holding a tenant, a vCon and its search tokens, for
// the migrations that follow.
func firstRelease(t *testing.T, dir string) {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(filepath.Join(dir, FileName)))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range migrations[:2] {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	tenant, uuid, version := oldTenant, oldUUID, oldVersion
	seven, eight := [16]byte{7}, [16]byte{8}
	for _, q := range []struct {
		q    string
		args []any
	}{
		{`CREATE TABLE schema_version (n INTEGER NOT NULL); INSERT INTO schema_version(n) VALUES (2)`, nil},
		{`INSERT INTO meta(key, value) VALUES ('catalog_id', ?), ('key_check', ?)`, []any{ids.NewRandom().Hex(), masterKey(t, 1).CheckValue()}},
		{`INSERT INTO tenants(id, name, created_at, search, search_built) VALUES (?, 'old', 0, 'parties', 1)`, []any{tenant[:]}},
		{`INSERT INTO vcons(tenant, uuid, current) VALUES (?, ?, ?)`, []any{tenant[:], uuid[:], version[:]}},
		{`INSERT INTO versions(id, tenant, uuid, stored_at, content_type, content_encoding, form, size, sealed_size, wrapped_key, location)
			VALUES (?, ?, ?, 0, 'application/vcon', '', 'unsigned', 1, 1, x'00', 'dir')`, []any{version[:], tenant[:], uuid[:]}},
		{`INSERT INTO search_tokens(tenant, token, version) VALUES (?, ?, ?), (?, ?, ?)`, []any{tenant[:], seven[:], version[:], tenant[:], eight[:], version[:]}},
	} {
		if _, err := db.Exec(q.q, q.args...); err != nil {
			t.Fatalf("%s: %v", q.q, err)
		}
	}
}

var (
	oldTenant  = ids.MustParse("0195a0c0-0000-4000-8000-000000000001")
	oldUUID    = ids.MustParse("0195a0c0-0000-4000-8000-000000000002")
	oldVersion = ids.MustParse("0195a0c0-0000-7000-8000-000000000003")
)

// TestMigrateFirstRelease opens a catalog of the first releases: it comes
// out at the newest schema, its search tokens carried over and found.
func TestMigrateFirstRelease(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	firstRelease(t, dir)
	c, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var n int
	if err := c.DB().QueryRow(`SELECT n FROM schema_version`).Scan(&n); err != nil || n != len(migrations) {
		t.Fatalf("schema version %d (%v), want %d", n, err, len(migrations))
	}
	var indexes []string
	rows, err := c.DB().Query(`SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		rows.Scan(&name)
		indexes = append(indexes, name)
	}
	rows.Close()
	for _, want := range []string{"versions_by_tenant", "admin_log_by_time", "search_tokens_by_version"} {
		if !slices.Contains(indexes, want) {
			t.Errorf("no index %s after the migration; the catalog has %v", want, indexes)
		}
	}
	for _, tokens := range [][][16]byte{{{7}}, {{7}, {8}}} {
		got, err := c.Search(ctx, oldTenant, tokens, ids.ID{}, 10)
		if err != nil || len(got) != 1 || got[0] != oldUUID {
			t.Fatalf("search %v after the migration: %v %v", tokens, got, err)
		}
	}
	// A migrated catalog holds what a new one does.
	fresh, _, err := Create(ctx, t.TempDir(), masterKey(t, 1).CheckValue())
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if a, b := schemaOf(t, c.DB()), schemaOf(t, fresh.DB()); a != b {
		t.Fatalf("the migrated schema:\n%s\nis not the new one:\n%s", a, b)
	}
}

func schemaOf(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.Query(`SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master ORDER BY type, name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var typ, name, tbl, q string
		rows.Scan(&typ, &name, &tbl, &q)
		fmt.Fprintf(&b, "%s %s %s %s\n", typ, name, tbl, q)
	}
	return b.String()
}

package export_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/duckdbtest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// lawfulBody is an unsigned vCon with one lawful-basis attachment whose
// body is basis (docs/lawful-basis.md).
func lawfulBody(uuid, basis string) []byte {
	return []byte(`{"vcon":"0.4.0","uuid":"` + uuid + `","parties":[{"tel":"+15555550100"}],"dialog":[],
		"attachments":[{"purpose":"lawful_basis","party":0,"dialog":0,"encoding":"json","body":` + basis + `}]}`)
}

// basisJSON is an attachment body of basis, expiring at expires ("" for
// never), with a grant for each purpose in grants (true) or refusals.
func basisJSON(basis, expires string, grants map[string]bool) string {
	exp := "null"
	if expires != "" {
		exp = strconv.Quote(expires)
	}
	var gs []string
	for p, ok := range grants {
		gs = append(gs, fmt.Sprintf(`{"purpose":%q,"granted":%t,"granted_at":"2026-01-02T12:00:00Z"}`, p, ok))
	}
	sort.Strings(gs)
	return fmt.Sprintf(`{"lawful_basis":%q,"expiration":%s,"purpose_grants":[%s]}`, basis, exp, strings.Join(gs, ","))
}

// TestExportForPurpose: a tenant (mode off: naming the purpose asks for
// the decision) holds vCons whose current lawful basis grants
// customer_service (two versions), refuses it, lacks a grant for it, has
// none, has expired, and one whose later version withdrew the grant, and
// a deleted one that granted it, beside the project's fixtures in every
// form. export --purpose customer_service writes exactly the two granted
// versions, counts the rest as withheld in its line, its manifest and its
// audit record, and names no uuid of them; the counts columns hold each
// version's own basis and expiry, as DuckDB reads them.
func TestExportForPurpose(t *testing.T) {
	duckdbtest.Path(t)
	e := testenv.New(t, testenv.Options{})
	d := storeEveryForm(t, e, "acme", 2)
	e.CLI("tenant", "set-metadata", d.Tenant, "counts")
	const cs = "customer_service"
	grant := basisJSON("consent", "2036-05-01T09:00:00Z", map[string]bool{cs: true, "marketing": false})
	stores := []struct {
		name   string
		bodies []string // one version each, stored in turn
		del    bool
	}{
		{"granted", []string{basisJSON("contract", "", map[string]bool{cs: true}), grant}, false},
		{"refused", []string{basisJSON("consent", "2036-05-01T09:00:00Z", map[string]bool{cs: false})}, false},
		{"no grant", []string{basisJSON("consent", "", map[string]bool{"marketing": true})}, false},
		{"expired", []string{basisJSON("consent", "2020-01-01T00:00:00Z", map[string]bool{cs: true})}, false},
		{"withdrawn", []string{grant, basisJSON("consent", "2036-05-01T09:00:00Z", map[string]bool{cs: false})}, false},
		{"deleted", []string{grant}, true},
	}
	uuids := map[string]string{}
	for _, s := range stores {
		u := ids.NewRandom().String()
		uuids[s.name] = u
		for i, b := range s.bodies {
			if r := e.Do("PUT", "/vcons/"+u, d.Key.Token, lawfulBody(u, b), "Content-Type", "application/vcon"); r.Status != 201 && r.Status != 200 {
				t.Fatalf("%s: PUT %d: %d %s", s.name, i, r.Status, r.Body)
			}
		}
		if s.del {
			if r := e.Do("DELETE", "/vcons/"+u, d.Key.Token, nil); r.Status != 204 {
				t.Fatalf("%s: DELETE %d %s", s.name, r.Status, r.Body)
			}
		}
	}
	all := keptVersions(t, e, d.Tenant)
	var granted []string
	for id, k := range all {
		if k.UUID.String() == uuids["granted"] {
			granted = append(granted, id)
		}
	}
	sort.Strings(granted)
	if len(granted) != 2 {
		t.Fatalf("the granted vCon has %d versions, want 2", len(granted))
	}

	dir := t.TempDir()
	r := exportCLI(t, e, "--tenant", "acme", "--to", dir, "--purpose", cs)
	withheld := int64(len(all) - len(granted))
	if r.Purpose == nil || *r.Purpose != cs || r.Rows != 2 || r.Withheld != withheld || r.Skipped != 0 || r.Unread != 0 {
		t.Fatalf("export line %+v; want purpose %s, 2 rows, %d withheld", r, cs, withheld)
	}
	rows := duckdbtest.Query(t, manifestFilesSQL(dir, r.Manifest)+`
  SELECT version::VARCHAR, md5(sealed), coalesce(lawful_basis, 'NULL'), coalesce(epoch_us(expires_at)::VARCHAR, 'NULL')
  FROM read_parquet(getvariable('files')) ORDER BY version`)
	want := [][]string{{"version", "md5(sealed)", "coalesce(lawful_basis, 'NULL')", "coalesce(CAST(epoch_us(expires_at) AS VARCHAR), 'NULL')"},
		{granted[0], all[granted[0]].SealedMD5, "contract", "NULL"},
		{granted[1], all[granted[1]].SealedMD5, "consent", strconv.FormatInt(time.Date(2036, 5, 1, 9, 0, 0, 0, time.UTC).UnixMicro(), 10)}}
	if fmt.Sprint(rows[1:]) != fmt.Sprint(want[1:]) {
		t.Errorf("the export for %s holds:\n%v\nwant:\n%v", cs, rows[1:], want[1:])
	}
	m := readManifest(t, dir, r.Manifest)
	if m.Purpose == nil || *m.Purpose != cs || m.Withheld != withheld || m.Rows != 2 || !slices.Equal(m.Live, []string{ids.MustParse(granted[1]).Hex()}) {
		t.Errorf("manifest %+v; want purpose %s, %d withheld, 2 rows, live the granted vCon's current version", m, cs, withheld)
	}
	// A count, never which: no uuid or version id of a withheld vCon is
	// anywhere in the export.
	var hidden []string
	for name, u := range uuids {
		if name != "granted" {
			hidden = append(hidden, u, ids.MustParse(u).Hex())
		}
	}
	for id, k := range all {
		if k.UUID.String() != uuids["granted"] {
			hidden = append(hidden, id, k.ID.Hex())
		}
	}
	if found := grepDir(t, dir, hidden); len(found) > 0 {
		t.Errorf("a withheld vCon or version is named in the export: %v", found)
	}
	wantAction := fmt.Sprintf("export purpose=%s withheld=%d", cs, withheld)
	if got := exportActions(t, e, d.Tenant); !slices.Equal(got, []string{wantAction}) {
		t.Errorf("audit actions of the export: %q, want %q", got, wantAction)
	}

	checkCountsColumns(t, e, d.Tenant, all)
}

// checkCountsColumns exports every version (no purpose: nothing withheld,
// purpose null) of the tenant, first under lawful-basis mode off, whose
// files have no lawful-basis columns, then under enforce, and checks each
// row's lawful_basis and expires_at against the catalog's record of that
// version.
func checkCountsColumns(t *testing.T, e *testenv.Env, tenant string, all map[string]kept) {
	t.Helper()
	dir := t.TempDir()
	off := exportCLI(t, e, "--tenant", tenant, "--to", dir)
	if cols := describe(t, dir+"/tenant=*/date=*/*.parquet"); off.Rows == 0 || slices.Contains(cols, "lawful_basis,VARCHAR") {
		t.Errorf("an export of a tenant whose mode is off has the lawful-basis columns: %v", cols)
	}
	e.CLI("tenant", "set-lawful-basis", tenant, "enforce")
	defer e.CLI("tenant", "set-lawful-basis", tenant, "off")
	dir = t.TempDir()
	r := exportCLI(t, e, "--tenant", tenant, "--to", dir)
	if r.Purpose != nil || r.Withheld != 0 || r.Rows != int64(len(all)) {
		t.Fatalf("export line %+v; want no purpose, nothing withheld, %d rows", r, len(all))
	}
	if m := readManifest(t, dir, r.Manifest); m.Purpose != nil || m.Withheld != 0 {
		t.Errorf("manifest of an export without purpose: purpose %v, withheld %d", m.Purpose, m.Withheld)
	}
	rows := duckdbtest.Query(t, manifestFilesSQL(dir, r.Manifest)+`
  SELECT version::VARCHAR, form, coalesce(lawful_basis, 'NULL'), coalesce(epoch_us(expires_at)::VARCHAR, 'NULL')
  FROM read_parquet(getvariable('files')) ORDER BY version`)
	if len(rows)-1 != len(all) {
		t.Fatalf("DuckDB read %d rows, want %d", len(rows)-1, len(all))
	}
	seen := map[string]int{}
	for _, row := range rows[1:] {
		v, err := e.Daemon.Cat.Version(context.Background(), ids.MustParse(row[0]))
		if err != nil {
			t.Fatal(err)
		}
		basis, expires := "NULL", "NULL"
		if v.Lawful.Basis != "" && v.Lawful.Basis != "unknown" {
			basis = v.Lawful.Basis
		}
		if v.Lawful.Expires != nil {
			expires = strconv.FormatInt(v.Lawful.Expires.UnixMicro(), 10)
		}
		if row[2] != basis || row[3] != expires {
			t.Errorf("%s version %s: lawful_basis %s, expires_at %s; the catalog has %q, %v", row[1], row[0], row[2], row[3], v.Lawful.Basis, v.Lawful.Expires)
		}
		seen[row[1]+" "+row[2]]++
	}
	if seen["encrypted NULL"] == 0 || seen["unsigned NULL"] == 0 || seen["unsigned consent"] == 0 || seen["unsigned contract"] == 0 {
		t.Errorf("the export should hold an encrypted version, one without a basis and ones of two bases: %v", seen)
	}
}

// exportActions lists the actions of the tenant's export records.
func exportActions(t *testing.T, e *testenv.Env, tenant string) []string {
	t.Helper()
	var out []string
	for line := range strings.SplitSeq(strings.TrimSpace(e.CLI("audit", "export", "--tenant", tenant)), "\n") {
		var rec catalog.Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(rec.Action, "export") && rec.Actor == "cli" && rec.Status == 200 {
			out = append(out, rec.Action)
		}
	}
	return out
}

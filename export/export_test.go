package export_test

// These tests store vCons through the real server (testenv: TLS, SQLite,
// the data directory), run the real command, and read what it wrote with
// real DuckDB (internal/duckdbtest), as docs/export.md does.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/export"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/parquetstore"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/duckdbtest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
	"github.com/vcon-server/vcon-server/vcon"
)

// levelColumns is what DESCRIBE shows of each level's own columns.
var levelColumns = map[string][]string{
	"none":   {"version,UUID", "stored_at,TIMESTAMP WITH TIME ZONE", "sealed,BLOB"},
	"form":   {"form,VARCHAR", "gzip,BOOLEAN", "size,BIGINT"},
	"times":  {"created_at,TIMESTAMP WITH TIME ZONE", "updated_at,TIMESTAMP WITH TIME ZONE"},
	"counts": {"party_count,INTEGER", "dialog_count,INTEGER"},
	"full":   {"uuid,UUID", "subject,VARCHAR", `parties,STRUCT(tel VARCHAR, mailto VARCHAR, "name" VARCHAR)[]`},
}

// columnsUpTo lists the columns of level and the levels below it, then
// DuckDB's date and tenant from the Hive directories.
func columnsUpTo(level string) []string {
	var out []string
	for _, l := range vocab.Levels {
		out = append(out, levelColumns[string(l)]...)
		if string(l) == level {
			break
		}
	}
	return append(out, "date,DATE", "tenant,VARCHAR")
}

func describe(t *testing.T, glob string) []string {
	t.Helper()
	var got []string
	for _, r := range duckdbtest.Query(t, "DESCRIBE SELECT * FROM read_parquet("+sqlString(glob)+")")[1:] {
		got = append(got, r[0]+","+r[1])
	}
	return got
}

// metaOf opens a stored version through the server's own archive and
// inspects it: what the clear columns should say.
func metaOf(t *testing.T, e *testenv.Env, id ids.ID) *vcon.Meta {
	t.Helper()
	ctx := context.Background()
	v, err := e.Daemon.Cat.Version(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := e.Daemon.Archive.OpenVersion(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	m, err := vcon.Inspect(rc, v.ContentEncoding == "gzip" || v.ContentType == "application/vcon+gzip", 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var partName = regexp.MustCompile(`^tenant=([0-9a-f-]{36})/date=(\d{4}-\d\d-\d\d)/part-[0-9a-f]{32}\.parquet$`)

func TestExportDirectoryCounts(t *testing.T) {
	duckdbtest.Path(t)
	e := testenv.New(t, testenv.Options{})
	d := storeEveryForm(t, e, "acme", 9)
	e.CLI("tenant", "set-metadata", d.Tenant, "counts")
	want := keptVersions(t, e, d.Tenant)

	dir := t.TempDir()
	r := exportCLI(t, e, "--tenant", "acme", "--to", dir)
	manifest := "tenant=" + d.Tenant + "/manifest/00000000000000000001.json"
	if r.Tenant != d.Tenant || r.To != dir || r.Metadata != "counts" || r.Seq != 1 || r.Manifest != manifest ||
		r.Files != 1 || r.Rows != int64(len(want)) || r.Skipped != 0 || r.Unread != 0 {
		t.Fatalf("export line %+v; want tenant %s, to %s, counts, seq 1, manifest %s, 1 file, %d rows, nothing skipped or unread",
			r, d.Tenant, dir, manifest, len(want))
	}

	// The files: the part files the manifest names, and the manifest.
	m := readManifest(t, dir, manifest)
	var named []string
	var bytes int64
	for _, f := range m.Files {
		named = append(named, f.Path)
		bytes += f.Bytes
		if !partName.MatchString(f.Path) || !strings.HasPrefix(f.Path, "tenant="+d.Tenant+"/date="+time.Now().UTC().Format(time.DateOnly)) {
			t.Errorf("part file %s: want tenant=%s/date=<today>/part-<32 hex digits>.parquet", f.Path, d.Tenant)
		}
		fi, err := os.Stat(filepath.Join(dir, f.Path))
		if err != nil || fi.Size() != f.Bytes {
			t.Errorf("part file %s: %v, size %d, manifest says %d", f.Path, err, fi.Size(), f.Bytes)
		}
	}
	if got, wantFiles := filesUnder(t, dir), append(slices.Clone(named), manifest); !slices.Equal(got, wantFiles) {
		t.Errorf("files under the target: %v, want %v", got, wantFiles)
	}
	if bytes != r.Bytes {
		t.Errorf("bytes %d, the manifest's files hold %d", r.Bytes, bytes)
	}
	var live []string
	for _, k := range want {
		if k.Current {
			live = append(live, k.ID.Hex())
		}
	}
	sort.Strings(live)
	if m.Format != 1 || m.Seq != 1 || m.Metadata != "counts" || m.Tenant != d.Tenant || m.Since != nil || m.Until != nil ||
		m.Rows != int64(len(want)) || !slices.Equal(m.Live, live) {
		t.Errorf("manifest %+v; want format 1, seq 1, counts, tenant %s, no bounds, %d rows, live %v", m, d.Tenant, len(want), live)
	}
	if _, err := time.Parse(time.RFC3339Nano, m.CreatedAt); err != nil {
		t.Errorf("manifest created_at %q: %v", m.CreatedAt, err)
	}
	if len(live) == 0 || len(live) == len(want) {
		t.Fatalf("the test needs current and hidden versions: %d live of %d", len(live), len(want))
	}

	// Seed 001's DESCRIBE, exactly.
	if got, wantCols := describe(t, dir+"/tenant="+d.Tenant+"/date=*/*.parquet"), columnsUpTo("counts"); !slices.Equal(got, wantCols) {
		t.Errorf("DESCRIBE:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantCols, "\n"))
	}

	// Seed 001's query through the manifest.
	var unsigned, parties int
	metas := map[string]*vcon.Meta{}
	for id, k := range want {
		metas[id] = metaOf(t, e, k.ID)
		if k.Form == "unsigned" {
			unsigned++
		}
		if n := metas[id].PartyCount; n > 0 {
			parties += n
		}
	}
	got := duckdbtest.Run(t, manifestFilesSQL(dir, manifest)+`
  SELECT count(*) AS versions, count(*) FILTER (WHERE form = 'unsigned') AS unsigned, sum(party_count) AS parties
  FROM read_parquet(getvariable('files'));`)
	if wantOut := fmt.Sprintf("versions,unsigned,parties\n%d,%d,%d\n", len(want), unsigned, parties); got != wantOut {
		t.Errorf("the manifest query printed:\n%s\nwant:\n%s", got, wantOut)
	}

	// Seed 001's glob, with the Hive directories as columns.
	got = duckdbtest.Run(t, `SELECT typeof(date) AS date_type, count(*) AS versions
  FROM read_parquet(`+sqlString(dir+"/tenant=*/date=*/*.parquet")+`, hive_partitioning = true) GROUP BY ALL`)
	if wantOut := fmt.Sprintf("date_type,versions\nDATE,%d\n", len(want)); got != wantOut {
		t.Errorf("the glob query printed:\n%s\nwant:\n%s", got, wantOut)
	}

	// Every row: its version id as the catalog has it, its sealed bytes as
	// stored, and the clear columns of counts as the body says.
	rows := duckdbtest.Query(t, manifestFilesSQL(dir, manifest)+`
  SELECT version::VARCHAR, md5(sealed), form, gzip::VARCHAR, size::VARCHAR,
    coalesce(epoch_us(created_at)::VARCHAR, 'NULL'), coalesce(epoch_us(updated_at)::VARCHAR, 'NULL'),
    coalesce(party_count::VARCHAR, 'NULL'), coalesce(dialog_count::VARCHAR, 'NULL'), tenant, date::VARCHAR
  FROM read_parquet(getvariable('files'), hive_partitioning = true) ORDER BY version`)
	if len(rows)-1 != len(want) {
		t.Fatalf("DuckDB read %d rows, want %d", len(rows)-1, len(want))
	}
	forms := map[string]int{}
	zoneless := 0
	for _, row := range rows[1:] {
		k, ok := want[row[0]]
		if !ok {
			t.Errorf("row %s: no kept version has that id", row[0])
			continue
		}
		mt := metas[row[0]]
		forms[k.Form]++
		wantRow := []string{k.ID.String(), k.SealedMD5, k.Form, strconv.FormatBool(k.Gzip), strconv.FormatInt(k.Size, 10),
			micros(mt.CreatedAt), micros(mt.UpdatedAt), countText(mt.PartyCount), countText(mt.DialogCount), d.Tenant,
			time.Now().UTC().Format(time.DateOnly)}
		if k.Form == "encrypted" {
			wantRow[5], wantRow[6], wantRow[7], wantRow[8] = "NULL", "NULL", "NULL", "NULL"
		}
		if k.Form == "unsigned" && mt.CreatedAt == nil {
			zoneless++
		}
		if !slices.Equal(row, wantRow) {
			t.Errorf("row:\n%v\nwant:\n%v", row, wantRow)
		}
	}
	if forms["unsigned"] == 0 || forms["signed"] == 0 || forms["encrypted"] == 0 || zoneless == 0 {
		t.Errorf("the export should hold every form and a created_at without a zone: %v, %d without", forms, zoneless)
	}

	// The audit log: one export record by the CLI.
	var records []catalog.Record
	for line := range strings.SplitSeq(strings.TrimSpace(e.CLI("audit", "export", "--tenant", d.Tenant)), "\n") {
		var rec catalog.Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Action == "export" {
			records = append(records, rec)
		}
	}
	if len(records) != 1 || records[0].Actor != "cli" || records[0].Status != 200 {
		t.Errorf("audit records of the export: %+v, want one by cli with status 200", records)
	}

	// At counts, no file holds a subject, a party or a uuid.
	if found := grepDir(t, dir, clearStrings(t, d)); len(found) > 0 {
		t.Errorf("clear vCon content in an export at counts: %v", found)
	}
}

func micros(t *time.Time) string {
	if t == nil {
		return "NULL"
	}
	return strconv.FormatInt(t.UnixMicro(), 10)
}

func countText(n int) string {
	if n < 0 {
		return "NULL"
	}
	return strconv.Itoa(n)
}

// clearStrings lists what only a full export may show of the tenant's
// vCons: the generated ones' strings, and the fixtures' uuids, subjects and
// parties (those long enough not to turn up by chance in ciphertext).
func clearStrings(t *testing.T, d *tenantData) []string {
	var out []string
	for _, g := range d.Generated {
		out = append(out, g.clear()...)
	}
	for _, f := range apitest.Fixtures(t) {
		m, err := vcon.Inspect(strings.NewReader(string(f.Body)), strings.Contains(f.Name, ".vcon.gz"), 64<<20)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.UUID)
		if m.Subject != nil {
			out = append(out, *m.Subject)
		}
		for _, p := range m.Parties {
			out = append(out, p.Tel, p.Mailto, p.Name)
		}
	}
	var long []string
	for _, s := range out {
		if len(s) >= 8 && !slices.Contains(long, s) {
			long = append(long, s)
		}
	}
	return long
}

func TestExportLevels(t *testing.T) {
	duckdbtest.Path(t)
	e := testenv.New(t, testenv.Options{})
	d := storeEveryForm(t, e, "acme", 4)
	want := keptVersions(t, e, d.Tenant)
	clear := clearStrings(t, d)
	for _, l := range vocab.Levels {
		level := string(l)
		t.Run(level, func(t *testing.T) {
			e.CLI("tenant", "set-metadata", d.Tenant, level)
			dir := t.TempDir()
			r := exportCLI(t, e, "--tenant", d.Tenant, "--to", dir)
			if r.Metadata != level || r.Rows != int64(len(want)) || r.Unread != 0 {
				t.Fatalf("export line %+v; want %s and %d rows", r, level, len(want))
			}
			if got, wantCols := describe(t, dir+"/tenant="+d.Tenant+"/date=*/*.parquet"), columnsUpTo(level); !slices.Equal(got, wantCols) {
				t.Errorf("DESCRIBE:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantCols, "\n"))
			}
			kv := duckdbtest.Query(t, "SELECT decode(value) FROM parquet_kv_metadata("+sqlString(dir+"/tenant="+d.Tenant+"/date=*/*.parquet")+") WHERE decode(key) = "+sqlString(parquetstore.MetadataLevel))
			if len(kv) != 2 || kv[1][0] != level {
				t.Errorf("the file's own level: %v, want %s", kv, level)
			}
			found := grepDir(t, dir, clear)
			if level != "full" {
				if len(found) > 0 {
					t.Errorf("clear vCon content at level %s: %v", level, found)
				}
				if level == "none" {
					rows := duckdbtest.Query(t, manifestFilesSQL(dir, r.Manifest)+"SELECT count(*), count(DISTINCT md5(sealed)) FROM read_parquet(getvariable('files'))")
					if rows[1][0] != strconv.Itoa(len(want)) || rows[1][1] != strconv.Itoa(len(want)) {
						t.Errorf("level none: %v", rows)
					}
				}
				return
			}
			// At full, the generated vCons' strings are in the Parquet
			// files, and only there.
			for _, g := range d.Generated {
				for _, s := range []string{g.Subject, g.Tel, g.Name, g.Mailto} {
					files := found[s]
					if len(files) == 0 {
						t.Errorf("%q is in no file at full", s)
					}
					for _, f := range files {
						if !partName.MatchString(f) {
							t.Errorf("%q is in %s, which is not a part file", s, f)
						}
					}
				}
			}
			rows := duckdbtest.Query(t, manifestFilesSQL(dir, r.Manifest)+`
  SELECT version::VARCHAR, form, coalesce(uuid::VARCHAR, 'NULL'), coalesce(subject, 'NULL'), coalesce(parties::VARCHAR, 'NULL'),
    coalesce(party_count::VARCHAR, 'NULL'), coalesce(epoch_us(created_at)::VARCHAR, 'NULL')
  FROM read_parquet(getvariable('files')) ORDER BY version`)
			gen := map[string]generated{}
			for _, g := range d.Generated {
				gen[g.UUID] = g
			}
			for _, row := range rows[1:] {
				k := want[row[0]]
				mt := metaOf(t, e, k.ID)
				if row[2] != k.UUID.String() {
					t.Errorf("%s: uuid %s, want %s", row[0], row[2], k.UUID)
				}
				switch {
				case k.Form == "encrypted":
					if row[3] != "NULL" || row[4] != "NULL" || row[5] != "NULL" || row[6] != "NULL" {
						t.Errorf("encrypted %s: subject, parties, count and time should be NULL: %v", row[0], row)
					}
				case gen[k.UUID.String()].UUID != "":
					g := gen[k.UUID.String()]
					wantParties := fmt.Sprintf("[{'tel': %s, 'mailto': NULL, 'name': %s}, {'tel': NULL, 'mailto': '%s', 'name': NULL}]", g.Tel, g.Name, g.Mailto)
					if row[3] != g.Subject || row[4] != wantParties || row[5] != "2" || row[6] != micros(mt.CreatedAt) {
						t.Errorf("generated %s: %v; want subject %q, parties %s, 2 parties, created_at %s", row[0], row, g.Subject, wantParties, micros(mt.CreatedAt))
					}
				default:
					wantSubject := "NULL"
					if mt.Subject != nil {
						wantSubject = *mt.Subject
					}
					if row[3] != wantSubject || row[5] != countText(mt.PartyCount) {
						t.Errorf("%s %s: subject %q and %s parties, want %q and %s", k.Form, row[0], row[3], row[5], wantSubject, countText(mt.PartyCount))
					}
				}
			}
		})
	}
}

// A version whose body cannot be opened any more (here a damaged object)
// is still exported byte for byte, its clear columns empty, and counted in
// unread.
func TestExportCountsUnreadBodies(t *testing.T) {
	duckdbtest.Path(t)
	e := testenv.New(t, testenv.Options{})
	d := storeEveryForm(t, e, "acme", 2)
	e.CLI("tenant", "set-metadata", d.Tenant, "counts")
	victim := currentVersion(t, keptVersions(t, e, d.Tenant), d.Generated[1].UUID)
	path := filepath.Join(e.Config.DataDir, "objects", d.Tenant, victim.ID.String())
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0x55 // the last chunk no longer authenticates
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	want := keptVersions(t, e, d.Tenant)

	dir := t.TempDir()
	r := exportCLI(t, e, "--tenant", "acme", "--to", dir)
	if r.Unread != 1 || r.Rows != int64(len(want)) || r.Skipped != 0 {
		t.Fatalf("export line %+v; want 1 unread of %d rows", r, len(want))
	}
	rows := duckdbtest.Query(t, manifestFilesSQL(dir, r.Manifest)+`
  SELECT version::VARCHAR, md5(sealed), form IS NULL, gzip IS NULL, size IS NULL, party_count IS NULL
  FROM read_parquet(getvariable('files')) WHERE version = `+sqlString(victim.ID.String()))
	if len(rows) != 2 || !slices.Equal(rows[1], []string{victim.ID.String(), want[victim.ID.String()].SealedMD5, "true", "true", "true", "true"}) {
		t.Errorf("the damaged version's row: %v", rows)
	}
}

// An export cut off part way removes the files it wrote and writes no
// manifest.
func TestExportCancelledRemovesItsFiles(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	d := storeEveryForm(t, e, "acme", 4)
	dir := t.TempDir()
	dst, err := export.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	var mu sync.Mutex
	_, err = export.Run(ctx, export.Options{
		Archive: e.Daemon.Archive, Tenant: findTenant(t, e, d.Tenant), Target: dst,
		FileBytes: 1, Workers: 1, Batch: 1, // a file per row
		AfterFetch: func(catalog.Version) {
			mu.Lock()
			defer mu.Unlock()
			if n++; n == 6 {
				if files := filesUnder(t, dir); len(files) < 3 {
					t.Errorf("files written before the cut: %v", files)
				}
				cancel()
			}
		},
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cut off export: %v", err)
	}
	if files := filesUnder(t, dir); len(files) != 0 {
		t.Errorf("a cut off export left %v", files)
	}
}

package parquetstore

// These tests read the files with real DuckDB, as the documentation pages do
// (seeds 000 and 001 show what DuckDB prints), not only with parquet-go.
// They need scripts/install-duckdb.sh; without it they are skipped, loudly,
// except on CI, where they fail.

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/test/kit/duckdbtest"
)

// sqlString quotes s as a SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkPagesPlainV2 reads every page header of file with parquet-go, since
// DuckDB does not show pages: each must be a version 2 data page, PLAIN and
// uncompressed, and no column chunk may have a dictionary page.
func checkPagesPlainV2(t *testing.T, file []byte) {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	md := f.Metadata()
	offsets := f.OffsetIndexes()
	pages := 0
	for g, rg := range md.RowGroups {
		for c, chunk := range rg.Columns {
			path := strings.Join(chunk.MetaData.PathInSchema, ".")
			if chunk.MetaData.DictionaryPageOffset != 0 {
				t.Errorf("row group %d, %s: dictionary page at %d", g, path, chunk.MetaData.DictionaryPageOffset)
			}
			if chunk.MetaData.Codec != format.Uncompressed {
				t.Errorf("row group %d, %s: codec %s", g, path, chunk.MetaData.Codec)
			}
			locs := offsets[g*len(rg.Columns)+c].PageLocations
			if len(locs) == 0 || locs[0].Offset != chunk.MetaData.DataPageOffset {
				t.Errorf("row group %d, %s: the first page is not at the chunk's data page offset", g, path)
			}
			for _, loc := range locs {
				h, _, err := readPageHeader(bytes.NewReader(file), loc.Offset, int64(loc.CompressedPageSize))
				if err != nil {
					t.Fatalf("row group %d, %s: %v", g, path, err)
				}
				v2, ok := h.DataPageHeaderV2.Get()
				if h.Type != format.DataPageV2 || !ok {
					t.Errorf("row group %d, %s: page of type %s, want DATA_PAGE_V2", g, path, h.Type)
					continue
				}
				if v2.Encoding != format.Plain {
					t.Errorf("row group %d, %s: page encoded %s, want PLAIN", g, path, v2.Encoding)
				}
				if c, ok := v2.IsCompressed.Get(); ok && c {
					t.Errorf("row group %d, %s: compressed page", g, path)
				}
				pages++
			}
		}
	}
	if pages == 0 {
		t.Fatal("no pages")
	}
}

// checkChunksInDuckDB checks parquet_metadata() of path: every column chunk
// uncompressed, without a dictionary page, its values PLAIN (RLE is listed
// beside PLAIN for the definition levels of optional columns).
func checkChunksInDuckDB(t *testing.T, path string, optional map[string]bool) {
	t.Helper()
	rows := duckdbtest.Query(t, fmt.Sprintf(
		"SELECT path_in_schema, compression, encodings, coalesce(dictionary_page_offset::VARCHAR, '') FROM parquet_metadata(%s) ORDER BY row_group_id, column_id",
		sqlString(path)))
	for _, r := range rows[1:] {
		col, compression, encodings, dict := r[0], r[1], r[2], r[3]
		want := "PLAIN"
		if optional[strings.Split(col, ", ")[0]] {
			want = "PLAIN, RLE"
		}
		if compression != "UNCOMPRESSED" || encodings != want || dict != "" {
			t.Errorf("parquet_metadata of %s: compression %s, encodings %q, dictionary page %q; want UNCOMPRESSED, %q, none", col, compression, encodings, dict, want)
		}
	}
}

func TestPackFileInDuckDB(t *testing.T) {
	duckdbtest.Path(t)
	// 16 MiB is pack_limit, the largest sealed object packed.
	sizes := []int{0, 1, 4 << 10, 1 << 20, 17, 16 << 20, 300 << 10}
	rows := packRows(t, len(sizes), func(i int) int { return sizes[i] })
	file, locs := writePack(t, rows, 0)
	checkPack(t, file, rows, locs)
	checkPagesPlainV2(t, file)

	dir := t.TempDir()
	path := filepath.Join(dir, "date=2026-11-05", "part-x.parquet")
	writeFile(t, path, file)
	glob := sqlString(dir + "/*/*.parquet")

	// What seed 000 runs, and what it prints.
	got := duckdbtest.Run(t, "SELECT typeof(version) AS version, typeof(date) AS date, count(*) > 0 AS rows FROM read_parquet("+glob+", hive_partitioning = true) GROUP BY ALL;")
	if want := "version,date,rows\nUUID,DATE,true\n"; got != want {
		t.Errorf("seed 000's query printed:\n%s\nwant:\n%s", got, want)
	}

	got = duckdbtest.Run(t, "DESCRIBE SELECT * FROM read_parquet("+glob+", hive_partitioning = true)")
	want := "column_name,column_type,null,key,default,extra\n" +
		"version,UUID,YES,,,\n" +
		"stored_at,TIMESTAMP WITH TIME ZONE,YES,,,\n" +
		"sealed,BLOB,YES,,,\n" +
		"date,DATE,YES,,,\n"
	if got != want {
		t.Errorf("DESCRIBE printed:\n%s\nwant:\n%s", got, want)
	}

	// DuckDB's sealed values are the rows' bytes, which checkPack found at
	// the locations a ranged read fetches.
	res := duckdbtest.Query(t, "SELECT typeof(version), typeof(stored_at), typeof(sealed), typeof(date), version::VARCHAR, replace(version::VARCHAR, '-', ''), epoch_us(stored_at), date::VARCHAR, md5(sealed), octet_length(sealed) FROM read_parquet("+glob+", hive_partitioning = true) ORDER BY version")
	if len(res) != 1+len(rows) {
		t.Fatalf("DuckDB read %d rows, want %d", len(res)-1, len(rows))
	}
	for i, r := range res[1:] {
		sum := md5.Sum(rows[i].Sealed)
		want := []string{"UUID", "TIMESTAMP WITH TIME ZONE", "BLOB", "DATE",
			rows[i].Version.String(), rows[i].Version.Hex(),
			strconv.FormatInt(rows[i].StoredAt.UnixMicro(), 10), "2026-11-05",
			hex.EncodeToString(sum[:]), strconv.Itoa(len(rows[i].Sealed))}
		if strings.Join(r, "|") != strings.Join(want, "|") {
			t.Errorf("row %d: DuckDB read\n%v\nwant\n%v", i, r, want)
		}
	}

	schema := duckdbtest.Query(t, "SELECT name, type, coalesce(type_length, ''), repetition_type, coalesce(logical_type, '') FROM parquet_schema("+sqlString(path)+") WHERE name <> 'vcon_pack'")
	wantSchema := [][]string{
		{"version", "FIXED_LEN_BYTE_ARRAY", "16", "REQUIRED", "UUIDType()"},
		{"stored_at", "INT64", "64", "REQUIRED", "TimestampType(isAdjustedToUTC=1, unit=TimeUnit(MILLIS=<null>, MICROS=<null>, NANOS=NanoSeconds()))"},
		{"sealed", "BYTE_ARRAY", "", "REQUIRED", ""},
	}
	if fmt.Sprint(schema[1:]) != fmt.Sprint(wantSchema) {
		t.Errorf("parquet_schema:\n%v\nwant\n%v", schema[1:], wantSchema)
	}

	checkChunksInDuckDB(t, path, nil)

	kv := duckdbtest.Query(t, "SELECT decode(key), decode(value) FROM parquet_kv_metadata("+sqlString(path)+") ORDER BY 1")
	if fmt.Sprint(kv[1:]) != "[[vcon-server.format 1]]" {
		t.Errorf("parquet_kv_metadata: %v", kv[1:])
	}
}

// exportLevelColumns is what DESCRIBE shows for each level's own columns
// (column_name, column_type), in order.
var exportLevelColumns = map[vocab.Level][][2]string{
	vocab.LevelNone: {
		{"version", "UUID"},
		{"stored_at", "TIMESTAMP WITH TIME ZONE"},
		{"sealed", "BLOB"},
	},
	vocab.LevelForm: {
		{"form", "VARCHAR"},
		{"gzip", "BOOLEAN"},
		{"size", "BIGINT"},
	},
	vocab.LevelTimes: {
		{"created_at", "TIMESTAMP WITH TIME ZONE"},
		{"updated_at", "TIMESTAMP WITH TIME ZONE"},
	},
	vocab.LevelCounts: {
		{"party_count", "INTEGER"},
		{"dialog_count", "INTEGER"},
	},
	vocab.LevelFull: {
		{"uuid", "UUID"},
		{"subject", "VARCHAR"},
		{"parties", `STRUCT(tel VARCHAR, mailto VARCHAR, "name" VARCHAR)[]`},
	},
}

// lawfulColumns follow counts' own in a file written with the lawful-basis
// columns.
var lawfulColumns = [][2]string{{"lawful_basis", "VARCHAR"}, {"expires_at", "TIMESTAMP WITH TIME ZONE"}}

// exportTestRows are three rows: every field set, every field nil, and
// parties an empty list.
func exportTestRows(t *testing.T) []ExportRow {
	t.Helper()
	s := func(s string) *string { return &s }
	yes, no := true, false
	size := int64(4321)
	parties, dialogs := int32(2), int32(0)
	created := time.Date(2026, 11, 5, 12, 0, 0, 0, time.UTC)
	updated := time.Date(2026, 11, 5, 12, 30, 15, 987654321, time.UTC)
	expires := time.Date(2036, 5, 1, 9, 0, 0, 123456789, time.UTC)
	u, err := ids.Parse("0f6c3a52-9d1e-4e7a-8b53-2c1d9f0a7e64")
	if err != nil {
		t.Fatal(err)
	}
	rows := packRows(t, 3, func(i int) int { return []int{100, 0, 5}[i] })
	return []ExportRow{
		{
			Version: rows[0].Version, StoredAt: rows[0].StoredAt, Sealed: rows[0].Sealed,
			Form: s("unsigned"), Gzip: &yes, Size: &size,
			CreatedAt: &created, UpdatedAt: &updated,
			PartyCount: &parties, DialogCount: &dialogs,
			LawfulBasis: s("consent,contract"), ExpiresAt: &expires,
			UUID: &u, Subject: s("Export example, 'one'"),
			Parties: []Party{
				{Tel: s("+15555550101"), Name: s("Caller Example")},
				{Mailto: s("mailto:agent@example.com")},
			},
		},
		{Version: rows[1].Version, StoredAt: rows[1].StoredAt, Sealed: rows[1].Sealed},
		{
			Version: rows[2].Version, StoredAt: rows[2].StoredAt, Sealed: rows[2].Sealed,
			Form: s("encrypted"), Gzip: &no, Size: &size, UUID: &u, Parties: []Party{},
		},
	}
}

func writeExport(t testing.TB, level vocab.Level, rows []ExportRow, cols Columns) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewExportWriter(&buf, level, cols)
	for _, r := range rows {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	n, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(rows)) {
		t.Fatalf("Close gave %d rows, want %d", n, len(rows))
	}
	return buf.Bytes()
}

func TestExportFilesInDuckDB(t *testing.T) {
	duckdbtest.Path(t)
	rows := exportTestRows(t)

	// What DuckDB shows of each row, column by column (as text, NULL as
	// empty), for every column of the highest level.
	wantValues := map[string][3]string{
		"version":      {rows[0].Version.String(), rows[1].Version.String(), rows[2].Version.String()},
		"stored_at":    {"2026-11-05 12:00:00.123456+00", "2026-11-05 12:00:00.124456+00", "2026-11-05 12:00:00.125456+00"},
		"sealed":       {hex.EncodeToString(rows[0].Sealed), "", hex.EncodeToString(rows[2].Sealed)},
		"form":         {"unsigned", "", "encrypted"},
		"gzip":         {"true", "", "false"},
		"size":         {"4321", "", "4321"},
		"created_at":   {"2026-11-05 12:00:00+00", "", ""},
		"updated_at":   {"2026-11-05 12:30:15.987654+00", "", ""},
		"party_count":  {"2", "", ""},
		"dialog_count": {"0", "", ""},
		"lawful_basis": {"consent,contract", "", ""},
		"expires_at":   {"2036-05-01 09:00:00.123456+00", "", ""},
		"uuid":         {"0f6c3a52-9d1e-4e7a-8b53-2c1d9f0a7e64", "", "0f6c3a52-9d1e-4e7a-8b53-2c1d9f0a7e64"},
		"subject":      {"Export example, 'one'", "", ""},
		"parties": {
			"[{'tel': +15555550101, 'mailto': NULL, 'name': Caller Example}, {'tel': NULL, 'mailto': 'mailto:agent@example.com', 'name': NULL}]",
			"", "[]",
		},
	}
	var plain, withLawful [][2]string
	for _, level := range vocab.Levels {
		plain = append(plain, exportLevelColumns[level]...)
		withLawful = append(withLawful, exportLevelColumns[level]...)
		if level == vocab.LevelCounts {
			withLawful = append(withLawful, lawfulColumns...)
		}
		t.Run(string(level), func(t *testing.T) { checkExportLevel(t, level, rows, Columns{}, plain, wantValues) })
		if level == vocab.LevelCounts || level == vocab.LevelFull {
			t.Run(string(level)+"+lawful", func(t *testing.T) { checkExportLevel(t, level, rows, Columns{Lawful: true}, withLawful, wantValues) })
		}
	}
}

// checkExportLevel writes rows at level, with the lawful-basis columns or
// not, and reads the file with DuckDB: its columns, every value, its
// key/value metadata and its chunks.
func checkExportLevel(t *testing.T, level vocab.Level, rows []ExportRow, cols Columns, columns [][2]string, wantValues map[string][3]string) {
	const tenant = "3b0d5f4e-8a41-4b1c-9c57-6d2e0f1a2b3c"
	file := writeExport(t, level, rows, cols)
	checkPagesPlainV2(t, file)
	dir := t.TempDir()
	path := filepath.Join(dir, "tenant="+tenant, "date=2026-11-05", "part-"+ids.NewRandom().String()+".parquet")
	writeFile(t, path, file)

	// DESCRIBE, as seed 001 runs it: the level's columns, then
	// DuckDB's date and tenant from the directory names.
	desc := duckdbtest.Query(t, "DESCRIBE SELECT * FROM read_parquet("+sqlString(dir+"/tenant="+tenant+"/date=*/*.parquet")+")")
	var got, want []string
	for _, r := range desc {
		got = append(got, r[0]+","+r[1])
	}
	want = append(want, "column_name,column_type")
	for _, c := range columns {
		want = append(want, c[0]+","+c[1])
	}
	want = append(want, "date,DATE", "tenant,VARCHAR")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("DESCRIBE at level %s:\n%s\nwant:\n%s", level, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	t.Logf("DESCRIBE at level %s:\n%s", level, strings.Join(got, "\n"))

	// Every value, NULL where the row's field was nil.
	var exprs []string
	optional := map[string]bool{}
	for _, c := range columns {
		exprs = append(exprs, fmt.Sprintf("coalesce(%s, '')", textOf(c[0])), fmt.Sprintf("%s IS NULL", c[0]))
		if c[0] != "version" && c[0] != "stored_at" && c[0] != "sealed" {
			optional[c[0]] = true
		}
	}
	res := duckdbtest.Query(t, "SELECT "+strings.Join(exprs, ", ")+" FROM read_parquet("+sqlString(path)+") ORDER BY version")
	if len(res) != 1+len(rows) {
		t.Fatalf("DuckDB read %d rows, want %d", len(res)-1, len(rows))
	}
	for i, r := range res[1:] {
		for j, c := range columns {
			text, isNull := r[2*j], r[2*j+1]
			wantText := wantValues[c[0]][i]
			wantNull := optional[c[0]] && wantText == ""
			if text != wantText || isNull != strconv.FormatBool(wantNull) {
				t.Errorf("row %d, %s: DuckDB read %q (null %s), want %q (null %t)", i, c[0], text, isNull, wantText, wantNull)
			}
		}
	}

	kv := duckdbtest.Query(t, "SELECT decode(key), decode(value) FROM parquet_kv_metadata("+sqlString(path)+") ORDER BY 1")
	if got, want := fmt.Sprint(kv[1:]), fmt.Sprintf("[[vcon-server.format 1] [vcon-server.metadata %s]]", level); got != want {
		t.Errorf("parquet_kv_metadata: %s, want %s", got, want)
	}

	checkChunksInDuckDB(t, path, optional)
}

// textOf is the SQL that shows column c as the test compares it.
func textOf(c string) string {
	switch c {
	case "sealed":
		return "lower(hex(sealed))"
	default:
		return c + "::VARCHAR"
	}
}

// TestExportSeedQueries runs seed 001's queries on an export like the one it
// makes (two unsigned vCons with one party each, at level counts) and checks
// what DuckDB prints, byte for byte.
func TestExportSeedQueries(t *testing.T) {
	duckdbtest.Path(t)
	tenant := ids.NewRandom().String()
	s := func(s string) *string { return &s }
	one := int32(1)
	zero := int32(0)
	var rows []ExportRow
	for i, pr := range packRows(t, 2, func(int) int { return 64 }) {
		at := time.Date(2026, 11, 5, 12, 0, 0, 0, time.UTC)
		rows = append(rows, ExportRow{
			Version: pr.Version, StoredAt: pr.StoredAt, Sealed: pr.Sealed,
			Form: s("unsigned"), CreatedAt: &at, PartyCount: &one, DialogCount: &zero,
			// Above the level: the writer must leave these out.
			Subject: s(fmt.Sprintf("Export example %d", i+1)),
			Parties: []Party{{Tel: s(fmt.Sprintf("+1555555010%d", i+1)), Name: s("Caller Example")}},
		})
	}
	file := writeExport(t, vocab.LevelCounts, rows, Columns{})
	for _, clear := range []string{"Export example", "+15555550101", "Caller Example"} {
		if bytes.Contains(file, []byte(clear)) {
			t.Errorf("a file at level counts holds %q", clear)
		}
	}

	export := t.TempDir()
	part := "tenant=" + tenant + "/date=2026-11-05/part-" + ids.NewRandom().String() + ".parquet"
	writeFile(t, filepath.Join(export, part), file)

	got := duckdbtest.Run(t, fmt.Sprintf(`
  SET VARIABLE files = (SELECT list(%s || f) FROM (SELECT unnest([%s]) AS f));
  SELECT count(*) AS versions, count(*) FILTER (WHERE form = 'unsigned') AS unsigned, sum(party_count) AS parties
  FROM read_parquet(getvariable('files'));`, sqlString(export+"/"), sqlString(part)))
	if want := "versions,unsigned,parties\n2,2,2\n"; got != want {
		t.Errorf("seed 001's manifest query printed:\n%s\nwant:\n%s", got, want)
	}

	got = duckdbtest.Run(t, "DESCRIBE SELECT * FROM read_parquet("+sqlString(export+"/tenant="+tenant+"/date=*/*.parquet")+")")
	var cut []string
	for _, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		f := strings.Split(line, ",")
		cut = append(cut, f[0]+","+f[1]) // | cut -d, -f1,2
	}
	want := `column_name,column_type
version,UUID
stored_at,TIMESTAMP WITH TIME ZONE
sealed,BLOB
form,VARCHAR
gzip,BOOLEAN
size,BIGINT
created_at,TIMESTAMP WITH TIME ZONE
updated_at,TIMESTAMP WITH TIME ZONE
party_count,INTEGER
dialog_count,INTEGER
date,DATE
tenant,VARCHAR`
	if strings.Join(cut, "\n") != want {
		t.Errorf("seed 001's DESCRIBE | cut -d, -f1,2 printed:\n%s\nwant:\n%s", strings.Join(cut, "\n"), want)
	}

	got = duckdbtest.Run(t, `
  SELECT typeof(date) AS date_type, count(*) AS versions
  FROM read_parquet(`+sqlString(export+"/tenant=*/date=*/*.parquet")+`, hive_partitioning = true) GROUP BY ALL`)
	if want := "date_type,versions\nDATE,2\n"; got != want {
		t.Errorf("seed 001's glob query printed:\n%s\nwant:\n%s", got, want)
	}
}

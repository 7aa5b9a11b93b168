package parquetstore

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/test/kit/duckdbtest"
)

// exportCountsBefore is the level counts as files written before
// lawful_basis and expires_at hold it.
type exportCountsBefore struct {
	exportTimes
	PartyCount  *int32 `parquet:"party_count"`
	DialogCount *int32 `parquet:"dialog_count"`
}

// TestExportCountsBeforeLawfulBasis: a file at counts from before the two
// columns and one from now read together with union_by_name, as
// docs/export.md says: the old file's rows have them empty.
func TestExportCountsBeforeLawfulBasis(t *testing.T) {
	duckdbtest.Path(t)
	rows := exportTestRows(t)
	var old bytes.Buffer
	schema := parquet.NewSchema("vcon_export", parquet.SchemaOf(new(exportCountsBefore)))
	w := parquet.NewGenericWriter[exportCountsBefore](&old, append(writerOptions(), schema)...)
	c := toCounts(&rows[0])
	if _, err := w.Write([]exportCountsBefore{{exportTimes: c.exportTimes, PartyCount: c.PartyCount, DialogCount: c.DialogCount}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a-before.parquet"), old.Bytes())
	writeFile(t, filepath.Join(dir, "b-now.parquet"), writeExport(t, vocab.LevelCounts, rows[:1]))

	got := duckdbtest.Run(t, "SELECT filename LIKE '%before%' AS old, party_count, lawful_basis, expires_at FROM read_parquet("+
		sqlString(dir+"/*.parquet")+", union_by_name = true, filename = true) ORDER BY filename")
	if want := "old,party_count,lawful_basis,expires_at\ntrue,2,,\nfalse,2,\"consent,contract\",2036-05-01 09:00:00.123456+00\n"; got != want {
		t.Errorf("an old and a new file at counts, by name:\n%s\nwant:\n%s", got, want)
	}
}

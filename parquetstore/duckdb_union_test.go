package parquetstore

import (
	"path/filepath"
	"testing"

	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/test/kit/duckdbtest"
)

// TestExportLawfulColumnsByName: a file at counts without the lawful-basis
// columns (a tenant whose mode is off, or a file from before them) and
// one with them read together with union_by_name, as docs/export.md says:
// the first file's rows have them empty.
func TestExportLawfulColumnsByName(t *testing.T) {
	duckdbtest.Path(t)
	rows := exportTestRows(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a-without.parquet"), writeExport(t, vocab.LevelCounts, rows[:1], Columns{}))
	writeFile(t, filepath.Join(dir, "b-with.parquet"), writeExport(t, vocab.LevelCounts, rows[:1], Columns{Lawful: true}))

	got := duckdbtest.Run(t, "SELECT filename LIKE '%without%' AS without, party_count, lawful_basis, expires_at FROM read_parquet("+
		sqlString(dir+"/*.parquet")+", union_by_name = true, filename = true) ORDER BY filename")
	if want := "without,party_count,lawful_basis,expires_at\ntrue,2,,\nfalse,2,\"consent,contract\",2036-05-01 09:00:00.123456+00\n"; got != want {
		t.Errorf("a file at counts without the columns and one with them, by name:\n%s\nwant:\n%s", got, want)
	}
}

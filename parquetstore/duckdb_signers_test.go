package parquetstore

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/test/kit/duckdbtest"
)

// TestExportSignersInDuckDB: a file with the signers column, at form and
// at full with the lawful-basis columns: signers comes last, a list of
// structs as DuckDB reads it, NULL for a version nobody checked.
func TestExportSignersInDuckDB(t *testing.T) {
	duckdbtest.Path(t)
	rows := exportTestRows(t)[:2]
	rows[0].Signers = []Signer{{Fingerprint: strings.Repeat("ab", 32), Subject: "CN=recorder-7", Issuer: "CN=Acme Recording CA",
		NotAfter: time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC), Alg: "RS256", Anchor: strings.Repeat("cd", 32)}}
	const signersType = "STRUCT(fingerprint VARCHAR, subject VARCHAR, issuer VARCHAR, not_after TIMESTAMP WITH TIME ZONE, alg VARCHAR, anchor VARCHAR)[]"
	for _, c := range []struct {
		level vocab.Level
		cols  Columns
		last2 string // the last two columns DESCRIBE shows
	}{
		{vocab.LevelForm, Columns{Signers: true}, "size,BIGINT\nsigners," + signersType},
		{vocab.LevelFull, Columns{Lawful: true, Signers: true}, `parties,STRUCT(tel VARCHAR, mailto VARCHAR, "name" VARCHAR)[]` + "\nsigners," + signersType},
	} {
		path := filepath.Join(t.TempDir(), "f.parquet")
		writeFile(t, path, writeExport(t, c.level, rows, c.cols))
		var cols []string
		for _, r := range duckdbtest.Query(t, "DESCRIBE SELECT * FROM read_parquet("+sqlString(path)+")")[1:] {
			cols = append(cols, r[0]+","+r[1])
		}
		if got := strings.Join(cols[len(cols)-2:], "\n"); got != c.last2 {
			t.Errorf("%s: the last columns are\n%s\nwant\n%s", c.level, got, c.last2)
		}
		got := duckdbtest.Run(t, "SELECT len(signers) AS n, signers[1].subject AS subject, signers[1].not_after AS not_after FROM read_parquet("+
			sqlString(path)+") ORDER BY version")
		if want := "n,subject,not_after\n1,CN=recorder-7,2027-06-01 00:00:00+00\n,,\n"; got != want {
			t.Errorf("%s: signers read\n%s\nwant\n%s", c.level, got, want)
		}
	}
}

package parquetstore

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
)

func TestParseLevel(t *testing.T) {
	for _, l := range vocab.Levels {
		got, err := vocab.ParseLevel(string(l))
		if err != nil || got != l {
			t.Errorf("vocab.ParseLevel(%q) = %q, %v", l, got, err)
		}
	}
	_, err := vocab.ParseLevel("everything")
	if err == nil {
		t.Fatal(`vocab.ParseLevel("everything") took it`)
	}
	for _, want := range []string{`"everything"`, "none, form, times, counts, full"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %s", err, want)
		}
	}
}

func TestExportWriterRefusesUnknownLevel(t *testing.T) {
	w := NewExportWriter(io.Discard, vocab.Level("all"), Columns{})
	if err := w.Write(ExportRow{}); err == nil || !strings.Contains(err.Error(), "none, form, times, counts, full") {
		t.Fatalf("Write at an unknown level: %v", err)
	}
	if _, err := w.Close(); err == nil {
		t.Fatal("Close at an unknown level succeeded")
	}
}

// TestExportColumnsByLevel reads each level's file back with parquet-go:
// its columns, in order, and its key/value metadata.
func TestExportColumnsByLevel(t *testing.T) {
	rows := exportTestRows(t)
	var want []string
	for _, level := range vocab.Levels {
		for _, c := range exportLevelColumns[level] {
			want = append(want, c[0])
		}
		file := writeExport(t, level, rows, Columns{})
		f, err := parquet.OpenFile(bytes.NewReader(file), int64(len(file)))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range f.Root().Columns() {
			got = append(got, c.Name())
		}
		if !slices.Equal(got, want) {
			t.Errorf("level %s: columns %v, want %v", level, got, want)
		}
		if v, _ := f.Lookup(MetadataLevel); v != string(level) {
			t.Errorf("level %s: %s = %q", level, MetadataLevel, v)
		}
		if v, _ := f.Lookup(MetadataFormat); v != FormatVersion {
			t.Errorf("level %s: %s = %q", level, MetadataFormat, v)
		}
		if f.NumRows() != int64(len(rows)) {
			t.Errorf("level %s: %d rows, want %d", level, f.NumRows(), len(rows))
		}
	}
}

// TestExportLeavesOutColumnsAboveItsLevel checks that no clear value of a
// higher level reaches the file's bytes (TestExportColumnsByLevel checks the
// columns).
func TestExportLeavesOutColumnsAboveItsLevel(t *testing.T) {
	rows := exportTestRows(t)
	for _, level := range vocab.Levels[:len(vocab.Levels)-1] {
		file := writeExport(t, level, rows, Columns{Lawful: true})
		for _, clear := range []string{"Export example", "+15555550101", "Caller Example", "agent@example.com"} {
			if bytes.Contains(file, []byte(clear)) {
				t.Errorf("level %s: the file holds %q", level, clear)
			}
		}
	}
	if !bytes.Contains(writeExport(t, vocab.LevelFull, rows, Columns{Lawful: true}), []byte("Caller Example")) {
		t.Error("level full: the file lacks a party's name")
	}
}

func TestExportSealedIsPlain(t *testing.T) {
	rows := exportTestRows(t)
	file := writeExport(t, vocab.LevelFull, rows, Columns{Lawful: true})
	// sealed is the third column, as in a pack file: its PLAIN values are
	// contiguous, so the same page walk finds them.
	f, err := parquet.OpenFile(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	cols := len(f.Metadata().RowGroups[0].Columns)
	pages := f.OffsetIndexes()[packSealedColumn].PageLocations
	if cols < 3 || len(pages) == 0 {
		t.Fatalf("%d columns, %d sealed pages", cols, len(pages))
	}
	locs, err := readSealedLocations(bytes.NewReader(file), int64(len(file)), pages, int64(len(rows)))
	if err != nil {
		t.Fatal(err)
	}
	for i, loc := range locs {
		if !bytes.Equal(file[loc.Offset:loc.Offset+loc.Length], rows[i].Sealed) {
			t.Errorf("row %d: sealed bytes not at [%d, %d)", i, loc.Offset, loc.Offset+loc.Length)
		}
	}
}

// TestExportWriterMemory writes a 200 MiB export at level counts and checks
// that the heap holds a fraction of it at most.
func TestExportWriterMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 200 MiB")
	}
	const rows, size = 200, 1 << 20
	path := filepath.Join(t.TempDir(), "part-export.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sealed := make([]byte, size)
	form := "unsigned"
	n := int32(2)
	var written int64
	grown := peakHeapGrowth(func(sample func()) {
		w := NewExportWriter(f, vocab.LevelCounts, Columns{Lawful: true})
		base := time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)
		for i := range rows {
			at := base.Add(time.Duration(i) * time.Second)
			if err := w.Write(ExportRow{Version: ids.NewV7(at), StoredAt: at, Sealed: sealed, Form: &form, CreatedAt: &at, PartyCount: &n, DialogCount: &n}); err != nil {
				t.Fatal(err)
			}
			sample()
		}
		if written, err = w.Close(); err != nil {
			t.Fatal(err)
		}
	})
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("export file of %d MiB: peak heap %d MiB above what it was before writing", fi.Size()>>20, grown>>20)
	if written != rows {
		t.Fatalf("%d rows written, want %d", written, rows)
	}
	if limit := fi.Size() / 3; grown > limit {
		t.Fatalf("heap grew by %d MiB writing a %d MiB file, want under %d MiB", grown>>20, fi.Size()>>20, limit>>20)
	}
}

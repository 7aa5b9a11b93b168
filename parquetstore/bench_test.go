package parquetstore

import (
	"io"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
)

// BenchmarkPackWrite writes pack rows of 4 KiB, the size of a small sealed
// vCon, and reports the throughput of their sealed bytes.
func BenchmarkPackWrite(b *testing.B) {
	const size = 4 << 10
	sealed := make([]byte, size)
	at := time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)
	b.SetBytes(size)
	b.ReportAllocs()
	w := NewPackWriter(io.Discard)
	for b.Loop() {
		at = at.Add(time.Millisecond)
		if err := w.Write(PackRow{Version: ids.NewV7(at), StoredAt: at, Sealed: sealed}); err != nil {
			b.Fatal(err)
		}
	}
	if _, _, err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkExportWrite writes export rows of 4 KiB at level counts.
func BenchmarkExportWrite(b *testing.B) {
	const size = 4 << 10
	sealed := make([]byte, size)
	at := time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)
	form := "unsigned"
	gzip := false
	stored := int64(size)
	parties, dialogs := int32(2), int32(1)
	b.SetBytes(size)
	b.ReportAllocs()
	w := NewExportWriter(io.Discard, vocab.LevelCounts, Columns{})
	for b.Loop() {
		at = at.Add(time.Millisecond)
		created := at.Add(-time.Hour)
		err := w.Write(ExportRow{
			Version: ids.NewV7(at), StoredAt: at, Sealed: sealed,
			Form: &form, Gzip: &gzip, Size: &stored,
			CreatedAt: &created, UpdatedAt: &at,
			PartyCount: &parties, DialogCount: &dialogs,
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if _, err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

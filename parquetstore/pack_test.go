package parquetstore

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
)

// packRows makes n rows in version order with sealed values of the sizes
// size(i) returns, filled with random bytes.
func packRows(t testing.TB, n int, size func(i int) int) []PackRow {
	t.Helper()
	rng := rand.NewChaCha8([32]byte{byte(n), 7})
	base := time.Date(2026, 11, 5, 12, 0, 0, 123456789, time.UTC)
	rows := make([]PackRow, n)
	for i := range rows {
		at := base.Add(time.Duration(i) * time.Millisecond)
		sealed := make([]byte, size(i))
		rng.Read(sealed)
		rows[i] = PackRow{Version: ids.NewV7(at), StoredAt: at, Sealed: sealed}
	}
	return rows
}

// writePack writes rows into a pack file in memory, with row groups flushed
// at rowGroupBytes (0: the default).
func writePack(t testing.TB, rows []PackRow, rowGroupBytes int64) ([]byte, []Location) {
	t.Helper()
	var buf bytes.Buffer
	w := NewPackWriter(&buf)
	if rowGroupBytes > 0 {
		w.rowGroupBytes = rowGroupBytes
	}
	for _, r := range rows {
		if err := w.Write(r); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	locs, size, err := w.Close()
	if err != nil {
		t.Fatalf("Close: %v", err)
	}
	if size != int64(buf.Len()) {
		t.Fatalf("Close gave size %d, the file has %d bytes", size, buf.Len())
	}
	return buf.Bytes(), locs
}

// checkPack checks that every location holds exactly its row's sealed
// bytes, and that reading the file alone finds the same locations, versions
// and times.
func checkPack(t *testing.T, file []byte, rows []PackRow, locs []Location) {
	t.Helper()
	if len(locs) != len(rows) {
		t.Fatalf("%d locations for %d rows", len(locs), len(rows))
	}
	for i, loc := range locs {
		if loc.Version != rows[i].Version {
			t.Fatalf("row %d: location of version %s, want %s", i, loc.Version, rows[i].Version)
		}
		if loc.Length != int64(len(rows[i].Sealed)) {
			t.Fatalf("row %d: length %d, want %d", i, loc.Length, len(rows[i].Sealed))
		}
		if loc.Offset < 4 || loc.Offset+loc.Length > int64(len(file)) {
			t.Fatalf("row %d: range [%d, %d) outside the file of %d bytes", i, loc.Offset, loc.Offset+loc.Length, len(file))
		}
		if !bytes.Equal(file[loc.Offset:loc.Offset+loc.Length], rows[i].Sealed) {
			t.Fatalf("row %d: bytes at [%d, %d) are not its sealed bytes", i, loc.Offset, loc.Offset+loc.Length)
		}
	}
	read, err := ReadLocations(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatalf("ReadLocations: %v", err)
	}
	if len(read) != len(locs) {
		t.Fatalf("ReadLocations found %d rows, Close gave %d", len(read), len(locs))
	}
	for i := range read {
		if read[i] != locs[i] {
			t.Fatalf("row %d: ReadLocations gives %+v, Close gave %+v", i, read[i], locs[i])
		}
	}
	i := 0
	err = ReadPackRows(bytes.NewReader(file), int64(len(file)), func(v ids.ID, at time.Time, loc Location) error {
		if v != rows[i].Version || !at.Equal(rows[i].StoredAt) || loc != locs[i] {
			t.Fatalf("row %d: ReadPackRows gives %s %s %+v, want %s %s %+v", i, v, at, loc, rows[i].Version, rows[i].StoredAt, locs[i])
		}
		i++
		return nil
	})
	if err != nil {
		t.Fatalf("ReadPackRows: %v", err)
	}
	if i != len(rows) {
		t.Fatalf("ReadPackRows gave %d rows, want %d", i, len(rows))
	}
}

func TestPackLocationsBySize(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
	}{
		{"empty", 0},
		{"one byte", 1},
		{"4KiB", 4 << 10},
		{"1MiB", 1 << 20},
		// pack_limit: the largest sealed object a pack run packs.
		{"16MiB", 16 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := packRows(t, 3, func(int) int { return tc.size })
			file, locs := writePack(t, rows, 0)
			checkPack(t, file, rows, locs)
		})
	}
}

func TestPackLocationsMixedSizes(t *testing.T) {
	sizes := []int{0, 1, 16 << 20, 3, 4 << 10, 0, 1 << 20, 300 << 10, 7}
	rows := packRows(t, len(sizes), func(i int) int { return sizes[i] })
	file, locs := writePack(t, rows, 0)
	checkPack(t, file, rows, locs)
}

func TestPackLocationsManyPagesAndRowGroups(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := make([]int, 3000)
	for i := range sizes {
		sizes[i] = rng.IntN(3000)
	}
	rows := packRows(t, len(sizes), func(i int) int { return sizes[i] })
	// About 4.5 MB of values in row groups of 1 MiB, each several pages of
	// the writer's 256 KiB page buffer.
	file, locs := writePack(t, rows, 1<<20)
	checkPack(t, file, rows, locs)

	f := openPack(t, file)
	if n := len(f.Metadata().RowGroups); n < 4 {
		t.Fatalf("%d row groups, want several", n)
	}
	pages := f.OffsetIndexes()[packSealedColumn].PageLocations
	if len(pages) < 3 {
		t.Fatalf("first row group has %d sealed pages, want several", len(pages))
	}
}

func TestPackEmptyFile(t *testing.T) {
	file, locs := writePack(t, nil, 0)
	if len(locs) != 0 {
		t.Fatalf("%d locations for no rows", len(locs))
	}
	checkPack(t, file, nil, locs)
}

func TestPackRefusesVersionsOutOfOrder(t *testing.T) {
	rows := packRows(t, 2, func(int) int { return 10 })
	w := NewPackWriter(io.Discard)
	if err := w.Write(rows[1]); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rows[0]); err == nil {
		t.Fatal("Write took a version older than the one before it")
	}
	if err := w.Write(rows[1]); err == nil {
		t.Fatal("Write took the same version twice")
	}
}

func TestReadLocationsRefusesOtherFiles(t *testing.T) {
	rows := packRows(t, 5, func(int) int { return 100 })
	file, locs := writePack(t, rows, 0)

	// An export file above level none has more columns than a pack file.
	var buf bytes.Buffer
	w := NewExportWriter(&buf, vocab.LevelForm, Columns{})
	if err := w.Write(ExportRow{Version: rows[0].Version, StoredAt: rows[0].StoredAt}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLocations(bytes.NewReader(buf.Bytes()), int64(buf.Len())); err == nil {
		t.Fatal("ReadLocations read an export file at level form as a pack file")
	}

	// A file cut short, or with a page header damaged, is refused rather
	// than read into wrong locations.
	if _, err := ReadLocations(bytes.NewReader(file[:len(file)-10]), int64(len(file)-10)); err == nil {
		t.Fatal("ReadLocations read a truncated file")
	}
	damaged := bytes.Clone(file)
	first := locs[0].Offset - 4 // the first value's length prefix
	damaged[first]++
	if _, err := ReadLocations(bytes.NewReader(damaged), int64(len(damaged))); err == nil {
		t.Fatal("ReadLocations read a file whose first value's length was changed")
	}
}

// peakHeapGrowth runs fn and returns by how much the live heap grew, at
// most, above what it was before, measured whenever fn calls sample: after
// each row, when the writer holds the most. Each measure follows a garbage
// collection, so that it counts what the writer holds and not garbage the
// collector has yet to free (of which the race detector makes more).
func peakHeapGrowth(fn func(sample func())) int64 {
	// Two collections empty the sync.Pools (the first moves them to their
	// victim caches), so that buffers another test left there are not
	// counted as already in use.
	runtime.GC()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	var peak uint64
	sample := func() {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		peak = max(peak, m.HeapAlloc)
	}
	fn(sample)
	sample()
	return int64(peak) - int64(before.HeapAlloc)
}

// TestPackWriterMemory writes a 300 MiB pack file and checks that the heap
// never holds more than a fraction of it: the writer flushes a row group
// whenever its sealed bytes pass defaultRowGroupBytes.
func TestPackWriterMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 300 MiB")
	}
	const rows, size = 300, 1 << 20
	f, err := os.Create(filepath.Join(t.TempDir(), "part-memory.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	sealed := make([]byte, size)
	for i := range sealed {
		sealed[i] = byte(i * 7)
	}
	var locs []Location
	var fileSize int64
	grown := peakHeapGrowth(func(sample func()) {
		w := NewPackWriter(f)
		base := time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)
		for i := range rows {
			at := base.Add(time.Duration(i) * time.Second)
			sealed[0] = byte(i)
			if err := w.Write(PackRow{Version: ids.NewV7(at), StoredAt: at, Sealed: sealed}); err != nil {
				t.Fatal(err)
			}
			sample()
		}
		locs, fileSize, err = w.Close()
		if err != nil {
			t.Fatal(err)
		}
	})
	if len(locs) != rows {
		t.Fatalf("%d locations, want %d", len(locs), rows)
	}
	t.Logf("pack file of %d MiB: peak heap %d MiB above what it was before writing", fileSize>>20, grown>>20)
	if limit := fileSize / 3; grown > limit {
		t.Fatalf("heap grew by %d MiB writing a %d MiB file, want under %d MiB", grown>>20, fileSize>>20, limit>>20)
	}

	got, err := ReadLocations(f, fileSize)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != locs[i] {
			t.Fatalf("row %d: ReadLocations gives %+v, Close gave %+v", i, got[i], locs[i])
		}
	}
	buf := make([]byte, size)
	for _, i := range []int{0, rows / 2, rows - 1} {
		loc := locs[i]
		if _, err := f.ReadAt(buf[:loc.Length], loc.Offset); err != nil {
			t.Fatal(err)
		}
		if buf[0] != byte(i) || !bytes.Equal(buf[1:], sealed[1:]) {
			t.Fatalf("row %d: its location does not hold its bytes", i)
		}
	}
}

func openPack(t *testing.T, file []byte) *parquet.File {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

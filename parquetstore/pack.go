package parquetstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/vcon-server/vcon-server/internal/ids"
)

// PackRow is one row of a pack file: one version's sealed object, byte for
// byte, beside its version id and the time it was stored. A pack file holds
// these three columns and nothing else, whatever the tenant's metadata level.
type PackRow struct {
	Version  ids.ID
	StoredAt time.Time
	Sealed   []byte
}

// Location is where a row's sealed bytes lie in a pack file: Length bytes
// from Offset, after the value's 4-byte length prefix. A packed version is
// read with one ranged read of exactly that range.
type Location struct {
	Version ids.ID
	Offset  int64
	Length  int64
}

// packRecord is the pack file's schema; the order of the fields is the order
// of the columns (docs/FORMAT.md, "Pack files": version, stored_at, sealed).
//
// sealed is PLAIN, not parquet-go's default DELTA_LENGTH_BYTE_ARRAY: only
// PLAIN stores each value as a 4-byte length followed by its bytes, so that
// a row's sealed object is one contiguous byte range a ranged read can fetch.
// Its pages carry no statistics and no bounds, since the min and max of a
// page would copy whole sealed values (up to pack_limit each) into the page
// headers and the footer.
type packRecord struct {
	Version  ids.ID    `parquet:"version,uuid"`
	StoredAt time.Time `parquet:"stored_at,timestamp(nanosecond:utc)"`
	Sealed   []byte    `parquet:"sealed,plain"`
}

const (
	packSealedColumn = 2

	// defaultRowGroupBytes bounds the bytes a writer holds before it writes
	// them out as a row group. The writer keeps every page of a row group in
	// memory until the row group is flushed.
	defaultRowGroupBytes = 32 << 20

	// rowOverhead counts the fixed columns of a row (16-byte version, 8-byte
	// time, 4-byte length prefix) against the bound, so that a file of
	// empty sealed values still gets row groups of bounded size.
	rowOverhead = 16 + 8 + 4

	// MetadataFormat is the key/value metadata key that holds the format
	// number of vcon-server's Parquet files.
	MetadataFormat = "vcon-server.format"
	// FormatVersion is the current format number.
	FormatVersion = "1"
)

// writerOptions are the settings both kinds of file share (docs/FORMAT.md:
// "plain Parquet 2, uncompressed, without dictionary pages").
func writerOptions() []parquet.WriterOption {
	return []parquet.WriterOption{
		parquet.DataPageVersion(2),
		parquet.Compression(&parquet.Uncompressed),
		// No column asks for a dictionary; PLAIN for every type that has no
		// encoding of its own keeps it that way.
		parquet.DefaultEncoding(&parquet.Plain),
		parquet.KeyValueMetadata(MetadataFormat, FormatVersion),
	}
}

// countingWriter counts the bytes written to the file.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// pageRows is one data page of the sealed column, as the writer's offset
// index describes it before the row group is written out: its offset within
// the column chunk, its size with its header, and its first row.
type pageRows struct {
	offset   int64
	size     int64
	firstRow int64
}

// PackWriter writes one pack file. It holds one row group in memory at a
// time, so a file of any size is written with bounded memory.
type PackWriter struct {
	out           *countingWriter
	w             *parquet.GenericWriter[packRecord]
	rowGroupBytes int64

	buffered int64 // bytes of the row group being written
	rows     []Location
	lengths  []int64      // sealed lengths of this row group's rows
	groups   [][]pageRows // sealed pages of each row group written
	groupLen [][]int64    // sealed lengths of each row group's rows
	last     ids.ID
	err      error
	closed   bool
}

// NewPackWriter starts a pack file on w, a temporary file or an upload: the
// caller makes the name visible only once Close has succeeded.
func NewPackWriter(w io.Writer) *PackWriter {
	out := &countingWriter{w: w}
	opts := append(writerOptions(),
		parquet.NewSchema("vcon_pack", parquet.SchemaOf(packRecord{})),
		parquet.SkipPageStatistics("sealed"),
		parquet.SkipPageBounds("sealed"),
	)
	return &PackWriter{
		out:           out,
		w:             parquet.NewGenericWriter[packRecord](out, opts...),
		rowGroupBytes: defaultRowGroupBytes,
	}
}

// Write adds a row. Rows come in ascending version order, as a pack run
// chooses them; a version out of order is refused. The writer copies
// r.Sealed, which the caller may reuse once Write returns.
func (w *PackWriter) Write(r PackRow) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New("parquetstore: write to a closed pack writer")
	}
	if len(w.rows) > 0 && bytes.Compare(r.Version[:], w.last[:]) <= 0 {
		return fmt.Errorf("parquetstore: pack rows out of version order: %s after %s", r.Version, w.last)
	}
	rec := []packRecord{{Version: r.Version, StoredAt: r.StoredAt, Sealed: r.Sealed}}
	if _, err := w.w.Write(rec); err != nil {
		w.err = fmt.Errorf("parquetstore: write pack row: %w", err)
		return w.err
	}
	w.last = r.Version
	w.rows = append(w.rows, Location{Version: r.Version, Length: int64(len(r.Sealed))})
	w.lengths = append(w.lengths, int64(len(r.Sealed)))
	w.buffered += int64(len(r.Sealed)) + rowOverhead
	if w.buffered >= w.rowGroupBytes {
		if err := w.flushRowGroup(); err != nil {
			w.err = err
			return err
		}
	}
	return nil
}

// capturePages ends the sealed column's last page of the row group and
// keeps the column's page locations: the writer forgets them once the row
// group is written out, and Close needs them to place every row.
func (w *PackWriter) capturePages() error {
	if len(w.lengths) == 0 {
		return nil
	}
	if err := w.w.ColumnWriters()[packSealedColumn].Flush(); err != nil {
		return fmt.Errorf("parquetstore: write pack page: %w", err)
	}
	locs := w.w.File().OffsetIndexes()[packSealedColumn].PageLocations
	pages := make([]pageRows, len(locs))
	for i, l := range locs {
		pages[i] = pageRows{offset: l.Offset, size: int64(l.CompressedPageSize), firstRow: l.FirstRowIndex}
	}
	w.groups = append(w.groups, pages)
	w.groupLen = append(w.groupLen, w.lengths)
	w.lengths = nil
	return nil
}

func (w *PackWriter) flushRowGroup() error {
	if err := w.capturePages(); err != nil {
		return err
	}
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("parquetstore: write pack row group: %w", err)
	}
	w.buffered = 0
	return nil
}

// Close ends the file and returns where each row's sealed bytes lie, in the
// order the rows were written, and the size of the file. The locations are
// those ReadLocations finds in the file.
func (w *PackWriter) Close() ([]Location, int64, error) {
	if w.err != nil {
		return nil, 0, w.err
	}
	if w.closed {
		return nil, 0, errors.New("parquetstore: pack writer closed twice")
	}
	w.closed = true
	if err := w.capturePages(); err != nil {
		return nil, 0, err
	}
	if err := w.w.Close(); err != nil {
		return nil, 0, fmt.Errorf("parquetstore: close pack file: %w", err)
	}
	md := w.w.File().Metadata()
	if len(md.RowGroups) != len(w.groups) {
		return nil, 0, fmt.Errorf("parquetstore: pack file has %d row groups, the writer made %d", len(md.RowGroups), len(w.groups))
	}
	next := 0
	for g, pages := range w.groups {
		chunk := md.RowGroups[g].Columns[packSealedColumn].MetaData
		lengths := w.groupLen[g]
		if md.RowGroups[g].NumRows != int64(len(lengths)) {
			return nil, 0, fmt.Errorf("parquetstore: pack row group %d has %d rows, the writer wrote %d", g, md.RowGroups[g].NumRows, len(lengths))
		}
		if err := placeRows(w.rows[next:next+len(lengths)], lengths, pages, chunk.DataPageOffset); err != nil {
			return nil, 0, err
		}
		next += len(lengths)
	}
	return w.rows, w.out.n, nil
}

// placeRows sets the offsets of one row group's rows from its sealed pages.
// A page of the sealed column is its header, then for each row a 4-byte
// length and the value: it is PLAIN, uncompressed, and a required column of
// a version 2 page has no level data. So the header's size is what the
// page's size leaves over its values, and each value follows the one before.
func placeRows(rows []Location, lengths []int64, pages []pageRows, chunkOffset int64) error {
	for p, page := range pages {
		end := int64(len(lengths))
		if p+1 < len(pages) {
			end = pages[p+1].firstRow
		}
		if page.firstRow < 0 || page.firstRow > end || end > int64(len(lengths)) {
			return fmt.Errorf("parquetstore: pack page %d has rows %d to %d of %d", p, page.firstRow, end, len(lengths))
		}
		var values int64
		for r := page.firstRow; r < end; r++ {
			values += 4 + lengths[r]
		}
		header := page.size - values
		if header <= 0 {
			return fmt.Errorf("parquetstore: pack page %d is %d bytes, its values %d", p, page.size, values)
		}
		pos := chunkOffset + page.offset + header
		for r := page.firstRow; r < end; r++ {
			rows[r].Offset = pos + 4
			pos += 4 + lengths[r]
		}
	}
	return nil
}

// ReadLocations finds where each row's sealed bytes lie in the pack file r
// of size bytes, from the file alone: its footer, the offset index of the
// sealed column and each page's header. It reads neither the sealed values
// nor, for large pages, anything but their 4-byte length prefixes. check and
// start-up recovery use it; it agrees with what PackWriter.Close returned.
func ReadLocations(r io.ReaderAt, size int64) ([]Location, error) {
	var locs []Location
	err := ReadPackRows(r, size, func(_ ids.ID, _ time.Time, loc Location) error {
		locs = append(locs, loc)
		return nil
	})
	return locs, err
}

// ReadPackRows calls fn for each row of the pack file r, in file order, with
// the row's version id, the time it was stored and the location of its
// sealed bytes, which it does not read. An error from fn stops the walk and
// is returned as it is.
func ReadPackRows(r io.ReaderAt, size int64, fn func(version ids.ID, storedAt time.Time, loc Location) error) error {
	f, err := parquet.OpenFile(r, size, parquet.SkipBloomFilters(true))
	if err != nil {
		return fmt.Errorf("parquetstore: open pack file: %w", err)
	}
	if err := checkPackSchema(f); err != nil {
		return err
	}
	md := f.Metadata()
	offsets := f.OffsetIndexes()
	if len(md.RowGroups) > 0 && len(offsets) != len(md.RowGroups)*3 {
		return errors.New("parquetstore: pack file has no offset index")
	}
	for g, rg := range f.RowGroups() {
		chunks := rg.ColumnChunks()
		versions, err := readVersions(chunks[0], rg.NumRows())
		if err != nil {
			return fmt.Errorf("parquetstore: pack row group %d: version: %w", g, err)
		}
		times, err := readTimes(chunks[1], rg.NumRows())
		if err != nil {
			return fmt.Errorf("parquetstore: pack row group %d: stored_at: %w", g, err)
		}
		pages := offsets[g*3+packSealedColumn].PageLocations
		sealed, err := readSealedLocations(r, size, pages, rg.NumRows())
		if err != nil {
			return fmt.Errorf("parquetstore: pack row group %d: sealed: %w", g, err)
		}
		for i := range versions {
			loc := sealed[i]
			loc.Version = versions[i]
			if err := fn(versions[i], times[i], loc); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkPackSchema refuses a file whose columns are not exactly those of a
// pack file, in order, or whose sealed column could not be read by range.
func checkPackSchema(f *parquet.File) error {
	md := f.Metadata()
	want := []struct {
		name string
		typ  format.Type
	}{
		{"version", format.FixedLenByteArray},
		{"stored_at", format.Int64},
		{"sealed", format.ByteArray},
	}
	// Schema[0] is the root; the pack file's three columns follow it.
	if len(md.Schema) != 1+len(want) {
		return fmt.Errorf("parquetstore: not a pack file: %d columns, want version, stored_at, sealed", len(md.Schema)-1)
	}
	for i, w := range want {
		el := md.Schema[1+i]
		typ, typOK := el.Type.Get()
		rep, repOK := el.RepetitionType.Get()
		if el.Name != w.name || !typOK || typ != w.typ || !repOK || rep != format.Required {
			return fmt.Errorf("parquetstore: not a pack file: column %d is %q, want required %s %s", i, el.Name, w.typ, w.name)
		}
	}
	for g, rg := range md.RowGroups {
		if len(rg.Columns) != len(want) {
			return fmt.Errorf("parquetstore: pack row group %d has %d columns", g, len(rg.Columns))
		}
		c := rg.Columns[packSealedColumn].MetaData
		if c.Codec != format.Uncompressed {
			return fmt.Errorf("parquetstore: pack row group %d: sealed is compressed (%s)", g, c.Codec)
		}
		if c.DictionaryPageOffset != 0 {
			return fmt.Errorf("parquetstore: pack row group %d: sealed has a dictionary page", g)
		}
	}
	return nil
}

func readVersions(chunk parquet.ColumnChunk, n int64) ([]ids.ID, error) {
	out := make([]ids.ID, 0, n)
	err := readColumn(chunk, func(v parquet.Value) error {
		b := v.ByteArray()
		if len(b) != 16 {
			return fmt.Errorf("value of %d bytes", len(b))
		}
		out = append(out, ids.ID(b))
		return nil
	})
	if err == nil && int64(len(out)) != n {
		err = fmt.Errorf("%d values for %d rows", len(out), n)
	}
	return out, err
}

func readTimes(chunk parquet.ColumnChunk, n int64) ([]time.Time, error) {
	out := make([]time.Time, 0, n)
	err := readColumn(chunk, func(v parquet.Value) error {
		out = append(out, time.Unix(0, v.Int64()).UTC())
		return nil
	})
	if err == nil && int64(len(out)) != n {
		err = fmt.Errorf("%d values for %d rows", len(out), n)
	}
	return out, err
}

func readColumn(chunk parquet.ColumnChunk, fn func(parquet.Value) error) error {
	pages := chunk.Pages()
	defer pages.Close()
	buf := make([]parquet.Value, 512)
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		values := p.Values()
		for {
			n, err := values.ReadValues(buf)
			for _, v := range buf[:n] {
				if v.IsNull() {
					parquet.Release(p)
					return errors.New("null value in a required column")
				}
				if err := fn(v); err != nil {
					parquet.Release(p)
					return err
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				parquet.Release(p)
				return err
			}
		}
		parquet.Release(p)
	}
}

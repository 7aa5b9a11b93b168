package parquetstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

const (
	// maxPageHeader is the most read for one page header. A sealed page's
	// header has no statistics and is a few dozen bytes.
	maxPageHeader = 64 << 10
	// wholePageLimit is the largest page whose values are read in one go to
	// find their length prefixes; a larger page is walked with a 4-byte read
	// per value, so that finding a 16 MiB value does not read it.
	wholePageLimit = 1 << 20
)

// readPageHeader decodes the thrift (compact protocol) page header at off
// and returns it with its length in bytes.
func readPageHeader(r io.ReaderAt, off, limit int64) (*format.PageHeader, int64, error) {
	buf := make([]byte, min(limit, maxPageHeader))
	n, err := r.ReadAt(buf, off)
	if n < len(buf) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, 0, fmt.Errorf("read page header at %d: %w", off, err)
	}
	br := bytes.NewReader(buf)
	var h format.PageHeader
	if err := thrift.NewDecoder(new(thrift.CompactProtocol).NewReader(br)).Decode(&h); err != nil {
		return nil, 0, fmt.Errorf("decode page header at %d: %w", off, err)
	}
	return &h, int64(len(buf) - br.Len()), nil
}

// readSealedLocations finds the offset and length of each value of a sealed
// column chunk from its pages: the page locations of the offset index, each
// page's header, and the 4-byte little-endian length that PLAIN puts before
// each BYTE_ARRAY value. Every size is checked against the others, so a
// location is only returned if the page accounts for each of its bytes.
func readSealedLocations(r io.ReaderAt, size int64, pages []format.PageLocation, numRows int64) ([]Location, error) {
	out := make([]Location, 0, numRows)
	for p, page := range pages {
		end := numRows
		if p+1 < len(pages) {
			end = pages[p+1].FirstRowIndex
		}
		rows := end - page.FirstRowIndex
		if page.FirstRowIndex != int64(len(out)) || rows < 0 {
			return nil, fmt.Errorf("page %d starts at row %d after %d rows", p, page.FirstRowIndex, len(out))
		}
		if page.Offset < 4 || page.CompressedPageSize <= 0 || page.Offset+int64(page.CompressedPageSize) > size {
			return nil, fmt.Errorf("page %d at %d, %d bytes, lies outside the file of %d bytes", p, page.Offset, page.CompressedPageSize, size)
		}
		h, hlen, err := readPageHeader(r, page.Offset, int64(page.CompressedPageSize))
		if err != nil {
			return nil, fmt.Errorf("page %d: %w", p, err)
		}
		if err := checkSealedPage(h, rows); err != nil {
			return nil, fmt.Errorf("page %d: %w", p, err)
		}
		body := int64(h.CompressedPageSize)
		if hlen+body != int64(page.CompressedPageSize) {
			return nil, fmt.Errorf("page %d: header of %d bytes and body of %d do not make the %d bytes the offset index gives", p, hlen, body, page.CompressedPageSize)
		}
		locs, err := walkPlainValues(r, page.Offset+hlen, body, rows)
		if err != nil {
			return nil, fmt.Errorf("page %d: %w", p, err)
		}
		out = append(out, locs...)
	}
	if int64(len(out)) != numRows {
		return nil, fmt.Errorf("%d values for %d rows", len(out), numRows)
	}
	return out, nil
}

// checkSealedPage accepts a data page whose body is only PLAIN values, one
// per row: uncompressed, no nulls, no level data.
func checkSealedPage(h *format.PageHeader, rows int64) error {
	if h.UncompressedPageSize != h.CompressedPageSize {
		return errors.New("compressed page")
	}
	switch h.Type {
	case format.DataPageV2:
		v, ok := h.DataPageHeaderV2.Get()
		if !ok {
			return errors.New("data page v2 without its header")
		}
		if c, ok := v.IsCompressed.Get(); ok && c {
			return errors.New("compressed page")
		}
		if v.Encoding != format.Plain {
			return fmt.Errorf("page encoded %s, want PLAIN", v.Encoding)
		}
		if v.NumNulls != 0 || v.DefinitionLevelsByteLength != 0 || v.RepetitionLevelsByteLength != 0 {
			return errors.New("page with level data")
		}
		if int64(v.NumValues) != rows || int64(v.NumRows) != rows {
			return fmt.Errorf("page of %d values, the offset index gives %d rows", v.NumValues, rows)
		}
	case format.DataPage:
		// A required, unnested column has no levels in a version 1 page
		// either; accepted so that a file rewritten by another tool still
		// reads.
		v, ok := h.DataPageHeader.Get()
		if !ok {
			return errors.New("data page without its header")
		}
		if v.Encoding != format.Plain {
			return fmt.Errorf("page encoded %s, want PLAIN", v.Encoding)
		}
		if int64(v.NumValues) != rows {
			return fmt.Errorf("page of %d values, the offset index gives %d rows", v.NumValues, rows)
		}
	default:
		return fmt.Errorf("%s where a data page should be", h.Type)
	}
	return nil
}

// walkPlainValues reads the length prefixes of rows PLAIN BYTE_ARRAY values
// filling exactly size bytes from off.
func walkPlainValues(r io.ReaderAt, off, size, rows int64) ([]Location, error) {
	locs := make([]Location, 0, rows)
	end := off + size
	var page []byte
	if size <= wholePageLimit {
		page = make([]byte, size)
		if _, err := r.ReadAt(page, off); err != nil && !(err == io.EOF && len(page) > 0) {
			return nil, fmt.Errorf("read page values at %d: %w", off, err)
		}
	}
	var prefix [4]byte
	pos := off
	for range rows {
		if end-pos < 4 {
			return nil, fmt.Errorf("value length at %d runs past the page end at %d", pos, end)
		}
		if page != nil {
			copy(prefix[:], page[pos-off:])
		} else if n, err := r.ReadAt(prefix[:], pos); n < 4 {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("read value length at %d: %w", pos, err)
		}
		n := int64(binary.LittleEndian.Uint32(prefix[:]))
		if n > end-pos-4 {
			return nil, fmt.Errorf("value of %d bytes at %d runs past the page end at %d", n, pos+4, end)
		}
		locs = append(locs, Location{Offset: pos + 4, Length: n})
		pos += 4 + n
	}
	if pos != end {
		return nil, fmt.Errorf("%d bytes after the last value of the page", end-pos)
	}
	return locs, nil
}

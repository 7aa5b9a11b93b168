package parquetstore

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
)

// MetadataLevel is the key/value metadata key of an export file that holds
// the level it was written at: a file keeps its level when the tenant's
// changes.
const MetadataLevel = "vcon-server.metadata"

// ExportRow is one version in an export file. The writer keeps the fields of
// its level and ignores the others; a nil field is written as NULL.
type ExportRow struct {
	Version  ids.ID
	StoredAt time.Time
	Sealed   []byte

	// form
	Form *string // "unsigned", "signed" or "encrypted"
	Gzip *bool
	Size *int64 // bytes as stored

	// times
	CreatedAt, UpdatedAt *time.Time

	// counts
	PartyCount, DialogCount *int32
	LawfulBasis             *string // as the catalog keeps it; nil for none or unknown
	ExpiresAt               *time.Time

	// full
	UUID    *ids.ID
	Subject *string
	Parties []Party // nil is NULL; an empty, non-nil slice is an empty list

	// form and above, with Columns.Signers: nil is NULL
	Signers []Signer
}

// Signer is one entry of the signers column: who a signature was verified
// to when the version was stored (docs/signatures.md).
type Signer struct {
	Fingerprint, Subject, Issuer string
	NotAfter                     time.Time
	Alg, Anchor                  string
}

// Party is one entry of the parties column at level full.
type Party struct {
	Tel, Mailto, Name *string
}

// The schema of each level is a struct that embeds the level before it, so
// the columns keep the order docs/export.md gives (a parquet.Group is a map,
// whose columns would come out sorted by name).
//
// Byte arrays are PLAIN, as in pack files: sealed so that each value is one
// contiguous byte range, strings because the files carry no dictionary and
// PLAIN is what every reader reads. sealed's pages carry no statistics: see
// packRecord.
type (
	exportNone struct {
		Version  ids.ID    `parquet:"version,uuid"`
		StoredAt time.Time `parquet:"stored_at,timestamp(nanosecond:utc)"`
		Sealed   []byte    `parquet:"sealed,plain"`
	}
	exportForm struct {
		exportNone
		Form *string `parquet:"form,plain"`
		Gzip *bool   `parquet:"gzip"`
		Size *int64  `parquet:"size"`
	}
	exportTimes struct {
		exportForm
		CreatedAt *time.Time `parquet:"created_at,timestamp(nanosecond:utc)"`
		UpdatedAt *time.Time `parquet:"updated_at,timestamp(nanosecond:utc)"`
	}
	exportCounts struct {
		exportTimes
		PartyCount  *int32 `parquet:"party_count"`
		DialogCount *int32 `parquet:"dialog_count"`
	}
	// The lawful-basis columns follow counts' in the files of a tenant
	// whose lawful-basis mode is not off, and of an export for a purpose
	// (docs/export.md); other files have the columns they always had.
	exportCountsLawful struct {
		exportCounts
		LawfulBasis *string    `parquet:"lawful_basis,plain"`
		ExpiresAt   *time.Time `parquet:"expires_at,timestamp(nanosecond:utc)"`
	}
	fullColumns struct {
		// An all-zero uuid is written as NULL: that is how a nil UUID is
		// passed, and the nil UUID is no vCon's uuid.
		UUID    ids.ID        `parquet:"uuid,optional,uuid"`
		Subject *string       `parquet:"subject,plain"`
		Parties []exportParty `parquet:"parties,optional,list"`
	}
	exportFull struct {
		exportCounts
		fullColumns
	}
	exportFullLawful struct {
		exportCountsLawful
		fullColumns
	}
	exportParty struct {
		Tel    *string `parquet:"tel,plain"`
		Mailto *string `parquet:"mailto,plain"`
		Name   *string `parquet:"name,plain"`
	}
)

func toNone(r *ExportRow) exportNone {
	return exportNone{Version: r.Version, StoredAt: r.StoredAt, Sealed: r.Sealed}
}

func toForm(r *ExportRow) exportForm {
	return exportForm{exportNone: toNone(r), Form: r.Form, Gzip: r.Gzip, Size: r.Size}
}

func toTimes(r *ExportRow) exportTimes {
	return exportTimes{exportForm: toForm(r), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

func toCounts(r *ExportRow) exportCounts {
	return exportCounts{exportTimes: toTimes(r), PartyCount: r.PartyCount, DialogCount: r.DialogCount}
}

func toCountsLawful(r *ExportRow) exportCountsLawful {
	return exportCountsLawful{exportCounts: toCounts(r), LawfulBasis: r.LawfulBasis, ExpiresAt: r.ExpiresAt}
}

func toFullColumns(r *ExportRow) fullColumns {
	f := fullColumns{Subject: r.Subject}
	if r.UUID != nil {
		f.UUID = *r.UUID
	}
	if r.Parties != nil {
		f.Parties = make([]exportParty, len(r.Parties))
		for i, p := range r.Parties {
			f.Parties[i] = exportParty(p)
		}
	}
	return f
}

func toFull(r *ExportRow) exportFull {
	return exportFull{exportCounts: toCounts(r), fullColumns: toFullColumns(r)}
}

func toFullLawful(r *ExportRow) exportFullLawful {
	return exportFullLawful{exportCountsLawful: toCountsLawful(r), fullColumns: toFullColumns(r)}
}

// rowSize estimates what a row adds to the row group in memory.
func rowSize(r *ExportRow) int64 {
	n := int64(len(r.Sealed)) + 64
	for _, s := range []*string{r.Form, r.LawfulBasis, r.Subject} {
		if s != nil {
			n += int64(len(*s))
		}
	}
	for _, p := range r.Parties {
		for _, s := range []*string{p.Tel, p.Mailto, p.Name} {
			if s != nil {
				n += int64(len(*s)) + 4
			}
		}
	}
	return n
}

// levelWriter writes the struct of one level.
type levelWriter interface {
	write(r *ExportRow) error
	flush() error
	close() error
}

type genericLevelWriter[T any] struct {
	w    *parquet.GenericWriter[T]
	conv func(*ExportRow) T
}

func (g *genericLevelWriter[T]) write(r *ExportRow) error {
	_, err := g.w.Write([]T{g.conv(r)})
	return err
}

func (g *genericLevelWriter[T]) flush() error { return g.w.Flush() }
func (g *genericLevelWriter[T]) close() error { return g.w.Close() }

func newLevelWriter[T any](w io.Writer, conv func(*ExportRow) T, opts []parquet.WriterOption) levelWriter {
	// The root is named for what the file is rather than for the Go type.
	schema := parquet.NewSchema("vcon_export", parquet.SchemaOf(new(T)))
	opts = append(opts, schema)
	return &genericLevelWriter[T]{w: parquet.NewGenericWriter[T](w, opts...), conv: conv}
}

// exportRowGroupBytes bounds the row group an export writer holds in memory:
// the writer keeps every page of a row group until it is flushed, and an
// export should run in a small, fixed amount of memory whatever the tenant's
// size (docs/export.md, "How fast"). Readers lose nothing by it: the clear
// columns of 4 MiB of sealed bytes are still a thousand rows of 4 KiB.
const exportRowGroupBytes = 4 << 20

// ExportWriter writes one export file at one metadata level. It holds one
// row group in memory at a time.
type ExportWriter struct {
	level         vocab.Level
	out           *countingWriter
	w             levelWriter
	rowGroupBytes int64
	buffered      int64
	rows          int64
	err           error
	closed        bool
}

// NewExportWriter starts an export file at level on w, a temporary file or
// an upload that the caller makes visible only once Close has succeeded,
// with the optional columns cols asks for where the level has them. An
// unknown level is reported by Write and Close.
func NewExportWriter(w io.Writer, level vocab.Level, cols Columns) *ExportWriter {
	opts := append(writerOptions(),
		parquet.KeyValueMetadata(MetadataLevel, string(level)),
		parquet.SkipPageStatistics("sealed"),
		parquet.SkipPageBounds("sealed"),
	)
	out := &countingWriter{w: w}
	ew := &ExportWriter{level: level, out: out, rowGroupBytes: exportRowGroupBytes}
	if level == vocab.LevelNone {
		cols = Columns{}
	}
	if level != vocab.LevelCounts && level != vocab.LevelFull {
		cols.Lawful = false
	}
	if start, ok := levelWriters[fileColumns{level, cols}]; ok {
		ew.w = start(out, opts)
	} else {
		_, err := vocab.ParseLevel(string(level))
		ew.err = fmt.Errorf("parquetstore: export writer: %w", err)
	}
	return ew
}

// Write adds a row. The writer copies what it needs from r before it
// returns.
func (w *ExportWriter) Write(r ExportRow) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New("parquetstore: write to a closed export writer")
	}
	if err := w.w.write(&r); err != nil {
		w.err = fmt.Errorf("parquetstore: write export row: %w", err)
		return w.err
	}
	w.rows++
	w.buffered += rowSize(&r)
	if w.buffered >= w.rowGroupBytes {
		if err := w.w.flush(); err != nil {
			w.err = fmt.Errorf("parquetstore: write export row group: %w", err)
			return w.err
		}
		w.buffered = 0
	}
	return nil
}

// Close ends the file and returns the number of rows it holds.
func (w *ExportWriter) Close() (int64, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.closed {
		return 0, errors.New("parquetstore: export writer closed twice")
	}
	w.closed = true
	if err := w.w.close(); err != nil {
		return 0, fmt.Errorf("parquetstore: close export file: %w", err)
	}
	return w.rows, nil
}

// Bytes is the number of bytes written to w so far: once Close has
// succeeded, the size of the file.
func (w *ExportWriter) Bytes() int64 { return w.out.n }

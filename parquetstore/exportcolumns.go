package parquetstore

import (
	"io"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/vcon-server/vcon-server/internal/vocab"
)

// Columns are the optional groups of columns an export file has beside
// its level's (docs/export.md): a tenant's policies decide them, so that
// the files of a tenant that applies neither keep their level's columns.
type Columns struct {
	// Lawful: lawful_basis and expires_at after counts' columns, at
	// counts and full (a tenant whose lawful-basis mode is not off, an
	// export for a purpose).
	Lawful bool
	// Signers: signers, last, at form and above (a tenant whose
	// signature policy is not off).
	Signers bool
}

type fileColumns struct {
	level vocab.Level
	cols  Columns
}

// The structs with the signers column: a level's struct, then signers.
type (
	exportSigner struct {
		Fingerprint string    `parquet:"fingerprint,plain"`
		Subject     string    `parquet:"subject,plain"`
		Issuer      string    `parquet:"issuer,plain"`
		NotAfter    time.Time `parquet:"not_after,timestamp(nanosecond:utc)"`
		Alg         string    `parquet:"alg,plain"`
		Anchor      string    `parquet:"anchor,plain"`
	}
	signersColumn struct {
		Signers []exportSigner `parquet:"signers,optional,list"`
	}
	exportFormSigned struct {
		exportForm
		signersColumn
	}
	exportTimesSigned struct {
		exportTimes
		signersColumn
	}
	exportCountsSigned struct {
		exportCounts
		signersColumn
	}
	exportCountsLawfulSigned struct {
		exportCountsLawful
		signersColumn
	}
	exportFullSigned struct {
		exportFull
		signersColumn
	}
	exportFullLawfulSigned struct {
		exportFullLawful
		signersColumn
	}
)

func toSigners(r *ExportRow) signersColumn {
	if r.Signers == nil {
		return signersColumn{}
	}
	out := make([]exportSigner, len(r.Signers))
	for i, s := range r.Signers {
		out[i] = exportSigner(s)
	}
	return signersColumn{out}
}

// levelWriter starts the writer of each level and set of columns.
var levelWriters = map[fileColumns]func(io.Writer, []parquet.WriterOption) levelWriter{
	{vocab.LevelNone, Columns{}}:                starter(toNone),
	{vocab.LevelForm, Columns{}}:                starter(toForm),
	{vocab.LevelTimes, Columns{}}:               starter(toTimes),
	{vocab.LevelCounts, Columns{}}:              starter(toCounts),
	{vocab.LevelFull, Columns{}}:                starter(toFull),
	{vocab.LevelCounts, Columns{Lawful: true}}:  starter(toCountsLawful),
	{vocab.LevelFull, Columns{Lawful: true}}:    starter(toFullLawful),
	{vocab.LevelForm, Columns{Signers: true}}:   starter(func(r *ExportRow) exportFormSigned { return exportFormSigned{toForm(r), toSigners(r)} }),
	{vocab.LevelTimes, Columns{Signers: true}}:  starter(func(r *ExportRow) exportTimesSigned { return exportTimesSigned{toTimes(r), toSigners(r)} }),
	{vocab.LevelCounts, Columns{Signers: true}}: starter(func(r *ExportRow) exportCountsSigned { return exportCountsSigned{toCounts(r), toSigners(r)} }),
	{vocab.LevelFull, Columns{Signers: true}}:   starter(func(r *ExportRow) exportFullSigned { return exportFullSigned{toFull(r), toSigners(r)} }),
	{vocab.LevelCounts, Columns{Lawful: true, Signers: true}}: starter(func(r *ExportRow) exportCountsLawfulSigned {
		return exportCountsLawfulSigned{toCountsLawful(r), toSigners(r)}
	}),
	{vocab.LevelFull, Columns{Lawful: true, Signers: true}}: starter(func(r *ExportRow) exportFullLawfulSigned {
		return exportFullLawfulSigned{toFullLawful(r), toSigners(r)}
	}),
}

func starter[T any](conv func(*ExportRow) T) func(io.Writer, []parquet.WriterOption) levelWriter {
	return func(w io.Writer, opts []parquet.WriterOption) levelWriter { return newLevelWriter(w, conv, opts) }
}

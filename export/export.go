// Package export writes a copy of one tenant's kept versions, current and
// hidden, as Parquet files with a manifest, to a directory or a bucket
// (docs/export.md). It reads the catalog and the store and never changes
// them; it runs beside a serving server.
//
// The order of an export, and why:
//
//  1. One short read takes the tenant's newest version id: the export is a
//     copy as of that moment. Versions are then listed in pages by id, each
//     page its own short read, so no read transaction is held across I/O
//     (docs/FORMAT.md, invariant 7) and memory does not grow with the
//     tenant.
//  2. Each version's sealed bytes are fetched from wherever they live,
//     looking the version up again on a 404 (it may have been packed
//     meanwhile). Only once the bytes have arrived is the version's key
//     looked up again: a version whose key is gone was purged while the
//     export ran and is left out (skipped), never half-written.
//     With a purpose, each page's versions are decided for it first, as a
//     read for it is (purpose.go); those withheld are never fetched.
//  3. Rows stream into part files that roll per store date and at a size
//     bound. Each file is created whole or not at all (temporary name,
//     fsync, link, folder fsync; or one create-only PutObject).
//  4. The manifest goes last, create-only: of two exports racing for one
//     number, the second is refused and removes its files. An export that
//     fails removes the files it wrote.
package export

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/parquetstore"
	"github.com/vcon-server/vcon-server/vcon/lawfulbasis"
)

// Defaults of the bounds an export keeps.
const (
	// DefaultFileBytes is the sealed bytes after which a part file is
	// closed and the next one started.
	DefaultFileBytes = 128 << 20
	// DefaultPageSize is how many versions one catalog read lists.
	DefaultPageSize = 1000
	// DefaultWorkers is how many batches of versions are fetched and
	// inspected at once; rows are still written in version order.
	DefaultWorkers = 8
	// DefaultBatch is how many versions a worker takes at once: their keys
	// are looked up again in one catalog read. Larger batches save little
	// CPU (a longer IN list costs more to prepare) and hold more in memory.
	DefaultBatch = 32
	// batchBytes closes a batch early once its sealed bytes reach it.
	batchBytes = 1 << 20
	// DefaultInFlight bounds the sealed bytes fetched but not yet written.
	// A version larger than it is fetched alone. Small versions never come
	// near it (the queue holds a few hundred); it bounds large ones.
	DefaultInFlight = 16 << 20
)

// Options describe one export.
type Options struct {
	// Archive reads the sealed bytes (Sealed) and holds the catalog (Cat)
	// and the master key (Key) that opens them for the clear columns.
	Archive *archive.Archive
	// Tenant is the tenant exported; its Metadata is the level the files
	// are written at.
	Tenant catalog.Tenant
	// Since and Until bound the store times: at or after Since, before
	// Until. A zero time is no bound.
	Since, Until time.Time
	// Purpose, when set, keeps only the versions a read for it may see
	// (docs/export.md, "Export for a purpose"); Skew is how long a lawful
	// basis holds past its expiration ([lawful_basis] skew).
	Purpose string
	Skew    time.Duration
	// Target receives the files: objstore.Dir over the --to directory, or
	// objstore.S3 over the --to bucket and prefix (see OpenDir, OpenBucket).
	Target objstore.Store
	// To is the target as the operator wrote it, for the result line.
	To string
	// Actor is the audit record's actor ("cli").
	Actor string
	// MaxVconSize bounds what inspecting a body may read or inflate; a
	// version stored larger is read up to its own size.
	MaxVconSize int64

	FileBytes int64 // DefaultFileBytes when 0
	PageSize  int   // DefaultPageSize when 0
	Workers   int   // DefaultWorkers when 0
	Batch     int   // DefaultBatch when 0
	InFlight  int64 // DefaultInFlight when 0
	// TempDir holds the export's own scratch file (the live version ids,
	// 16 bytes each); the system's temporary folder when "".
	TempDir string
	Now     func() time.Time

	// Progress, when set, is told the sealed size of each version once
	// its row is written or it is skipped, in version order from one
	// goroutine, for a progress line.
	Progress func(sealed int64)

	// Test seams. AfterFetch runs once a version's sealed bytes have
	// arrived and before its key is looked up again. BeforePublish runs
	// once the manifest number is chosen, before the manifest is written.
	AfterFetch    func(v catalog.Version)
	BeforePublish func(seq int64)
}

// Result is the line the command prints.
type Result struct {
	Tenant   string `json:"tenant"`
	To       string `json:"to"`
	Metadata string `json:"metadata"`
	Seq      int64  `json:"seq"`
	Manifest string `json:"manifest"` // its path under the target
	Files    int    `json:"files"`
	Rows     int64  `json:"rows"`
	Bytes    int64  `json:"bytes"` // of the part files
	Skipped  int64  `json:"skipped"`
	Unread   int64  `json:"unread"`
	// Purpose is null for an export of every version; Withheld counts
	// the versions the purpose may not see, which the export left out.
	Purpose  *string `json:"purpose"`
	Withheld int64   `json:"withheld"`
}

// RaceError is the refusal of an export whose manifest number another
// export took first.
type RaceError struct {
	Manifest string
}

func (e *RaceError) Error() string {
	return fmt.Sprintf("another export published %s, the manifest this export was about to write, while it ran; this export removed its files: run it again", e.Manifest)
}

// run is one export in progress.
type run struct {
	opt   Options
	level vocab.Level
	now   time.Time

	files  []fileEntry
	cur    *part
	rows   int64
	bytes  int64
	skip   int64
	unread int64
	// withheld counts the versions the purpose may not see.
	withheld int64
	// columns are the optional columns of the files (parquetstore.Columns).
	columns parquetstore.Columns

	live      *os.File
	liveBuf   *bufio.Writer
	liveCount int64
}

type fileEntry struct {
	Path  string `json:"path"`
	Rows  int64  `json:"rows"`
	Bytes int64  `json:"bytes"`
}

// Run exports opt.Tenant to opt.Target and records it in the tenant's
// audit log. On failure it removes what it wrote, as far as it can.
func Run(ctx context.Context, opt Options) (Result, error) {
	level, err := vocab.ParseLevel(string(opt.Tenant.Metadata))
	if err != nil {
		return Result{}, fmt.Errorf("the tenant's metadata level: %w", err)
	}
	if opt.Purpose != "" && !lawfulbasis.ValidPurpose(opt.Purpose) {
		return Result{}, fmt.Errorf("export: purpose %q is not 1 to %d characters of a-z, 0-9 and _: name it as the vCons' purpose_grants do", opt.Purpose, lawfulbasis.MaxPurposeLen)
	}
	if opt.FileBytes <= 0 {
		opt.FileBytes = DefaultFileBytes
	}
	if opt.PageSize <= 0 {
		opt.PageSize = DefaultPageSize
	}
	if opt.Workers <= 0 {
		opt.Workers = DefaultWorkers
	}
	if opt.Batch <= 0 {
		opt.Batch = DefaultBatch
	}
	if opt.InFlight <= 0 {
		opt.InFlight = DefaultInFlight
	}
	if opt.MaxVconSize <= 0 {
		opt.MaxVconSize = 64 << 20
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Actor == "" {
		opt.Actor = catalog.CLI.Name
	}
	x := &run{opt: opt, level: level, now: opt.Now().UTC()}
	pol, err := opt.Archive.Cat.SignaturePolicyOf(ctx, opt.Tenant.ID)
	if err != nil {
		return Result{}, fmt.Errorf("export: the tenant's signature policy: %w", err)
	}
	x.columns = parquetstore.Columns{Lawful: x.lawful(), Signers: pol.Mode != "" && pol.Mode != vocab.SignaturesOff}
	x.live, err = os.CreateTemp(opt.TempDir, "vcon-export-live-*")
	if err != nil {
		return Result{}, fmt.Errorf("export: scratch file: %w", err)
	}
	defer func() {
		x.live.Close()
		os.Remove(x.live.Name())
	}()
	x.liveBuf = bufio.NewWriterSize(x.live, 64<<10)

	if err := x.export(ctx); err != nil {
		x.abort(ctx)
		return Result{}, err
	}
	crashpoint.Hit(crashpoint.ExportBeforeManifest)
	manifest, seq, err := x.publish(ctx)
	if err != nil {
		x.abort(ctx)
		return Result{}, err
	}
	// The record follows the manifest, so it never names an export that
	// did not happen. Once the manifest is out, an interruption no longer
	// stops the record; if it cannot be written, the export is undone.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	err = opt.Archive.Cat.Audit(actx, opt.Tenant.ID, catalog.Record{Actor: opt.Actor, Action: x.action(), Status: 200})
	cancel()
	if err != nil {
		x.remove(ctx, manifest)
		x.abort(ctx)
		return Result{}, fmt.Errorf("the export could not be recorded in the tenant's audit log, so its files were removed: %w", err)
	}
	return Result{
		Tenant: opt.Tenant.ID.String(), To: opt.To, Metadata: string(level),
		Seq: seq, Manifest: manifest, Files: len(x.files),
		Rows: x.rows, Bytes: x.bytes, Skipped: x.skip, Unread: x.unread,
		Purpose: purposeText(opt.Purpose), Withheld: x.withheld,
	}, nil
}

// export lists, fetches and writes every row and closes the last file.
func (x *run) export(ctx context.Context) error {
	cat := x.opt.Archive.Cat
	upto, found, err := cat.NewestVersion(ctx, x.opt.Tenant.ID)
	if err != nil {
		return err
	}
	if found {
		if err := x.stream(ctx, upto); err != nil {
			return err
		}
	}
	if err := x.closePart(); err != nil {
		return err
	}
	return x.liveBuf.Flush()
}

// write adds one finished item's row to the current part file, rolling to
// a new file at a new date or past the size bound.
func (x *run) write(ctx context.Context, j *item) error {
	if x.opt.Progress != nil {
		x.opt.Progress(j.v.SealedSize)
	}
	if j.withheld {
		x.withheld++
		return nil
	}
	if j.skip {
		x.skip++
		return nil
	}
	if j.unread {
		x.unread++
	}
	date := j.v.StoredAt.UTC().Format(time.DateOnly)
	size := int64(len(j.row.Sealed))
	if x.cur != nil && (x.cur.date != date || (x.cur.rows > 0 && x.cur.sealed+size > x.opt.FileBytes)) {
		if err := x.closePart(); err != nil {
			return err
		}
	}
	if x.cur == nil {
		if err := x.openPart(ctx, date); err != nil {
			return err
		}
	}
	if err := x.cur.w.Write(j.row); err != nil {
		return fmt.Errorf("export: write a row: %w", err)
	}
	x.cur.rows++
	x.cur.sealed += size
	x.rows++
	if j.v.Current {
		if _, err := x.liveBuf.Write(j.v.ID[:]); err != nil {
			return fmt.Errorf("export: scratch file: %w", err)
		}
		x.liveCount++
	}
	return nil
}

// part is the file being written.
type part struct {
	key    string
	date   string
	up     objstore.Upload
	buf    *bufio.Writer
	w      *parquetstore.ExportWriter
	rows   int64
	sealed int64
}

func (x *run) openPart(ctx context.Context, date string) error {
	key := archive.ExportPartKey(x.opt.Tenant.ID, date, ids.NewV7(x.opt.Now()))
	up, err := x.opt.Target.Upload(ctx, key, true)
	if err != nil {
		return fmt.Errorf("export: start a file in %s: %w", x.opt.Target, err)
	}
	// A row group is written out at once, page by page: a quarter of a
	// megabyte per write is plenty, and a whole megabyte per file would be
	// a fifth of the row group's own bound.
	buf := bufio.NewWriterSize(up, 256<<10)
	x.cur = &part{key: key, date: date, up: up, buf: buf, w: parquetstore.NewExportWriter(buf, x.level, x.columns)}
	return nil
}

// closePart finishes the current file and publishes it under its name.
func (x *run) closePart() error {
	p := x.cur
	if p == nil {
		return nil
	}
	x.cur = nil
	defer p.up.Abort()
	if _, err := p.w.Close(); err != nil {
		return fmt.Errorf("export: finish a file: %w", err)
	}
	if err := p.buf.Flush(); err != nil {
		return fmt.Errorf("export: write a file to %s: %w", x.opt.Target, err)
	}
	err := p.up.Commit()
	if errors.Is(err, objstore.ErrExists) {
		return fmt.Errorf("export: the file name %s is taken in %s; nothing was replaced", p.key, x.opt.Target)
	}
	if err != nil {
		return fmt.Errorf("export: write a file to %s: %w", x.opt.Target, err)
	}
	// Every byte the writer wrote reached the file: the buffer was flushed
	// and the upload committed.
	size := p.w.Bytes()
	x.files = append(x.files, fileEntry{Path: p.key, Rows: p.rows, Bytes: size})
	x.bytes += size
	crashpoint.Hit(crashpoint.ExportAfterFile)
	return nil
}

// abort drops the file in progress and removes the files written.
func (x *run) abort(ctx context.Context) {
	if x.cur != nil {
		x.cur.up.Abort()
		x.cur = nil
	}
	for _, f := range x.files {
		x.remove(ctx, f.Path)
	}
	x.files = nil
}

// remove deletes one file of this export even when ctx has ended (an
// interrupted export still cleans up), within a bound.
func (x *run) remove(ctx context.Context, key string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	_ = x.opt.Target.Delete(ctx, key)
}

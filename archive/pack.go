package archive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/parquetstore"
)

// ParquetOptions configure Parquet storage ([storage.parquet]).
type ParquetOptions struct {
	// PackLimit is the largest sealed object a pack run takes; a larger
	// one stays an object.
	PackLimit int64
	// ReaderGrace is how long a merged-away file and a superseded manifest
	// stay, for readers on an older manifest.
	ReaderGrace time.Duration
	// SpoolDir holds the local copies a merge or a rewrite reads from, and
	// manifests before their PUT: sealed bytes and version ids only.
	SpoolDir string
	// MergeTarget: a live file below it is small, and a pack run merges a
	// date's small files into one. DefaultMergeTarget when 0.
	MergeTarget int64
	// MaxFileBytes bounds the sealed bytes of one new file; a pack run with
	// more objects of a date writes several. DefaultMaxFileBytes when 0.
	MaxFileBytes int64
}

const (
	// DefaultMergeTarget is the size under which a file is merged: big
	// enough that a day of small vCons ends in one file, small enough that
	// a day's big file is not written again by every run
	// (docs/parquet-storage.md, "Compaction").
	DefaultMergeTarget = 128 << 20
	// DefaultMaxFileBytes bounds one file, so that a pack run over a large
	// backlog neither fills the spool nor commits one enormous transaction.
	DefaultMaxFileBytes = 1 << 30

	maxFileRows = 1 << 20
	maxCopies   = 100000 // objects of packed versions held before they are deleted
	spoolPrefix = "pack-"

	msgNameTaken     = "a pack file's new name was already taken; the pack run stops"
	msgStillThere    = "the storage still holds a pack file it was told to delete"
	msgRounds        = "purges left pack files to rewrite after 4 rounds"
	msgRecoveryFiles = "start-up recovery removed pack files that no catalog row names"
)

var (
	// ErrNameTaken: a create-only PUT of a new pack file was refused, so
	// another writer used a name this server chose.
	ErrNameTaken = errors.New(msgNameTaken)
	// errAbandoned: a commit found that what it replaces changed; the new
	// file was deleted and the next run tries again.
	errAbandoned = errors.New("the rows changed while the file was written")
)

// PackStats counts what one pack run did. Files and Versions count only
// what was packed from objects, as the run's log line reports them.
type PackStats struct {
	Files    int  // new files packed from objects
	Versions int  // versions moved from objects into files
	Failed   int  // tenants whose run failed
	Merged   int  // files written by merges
	Dropped  int  // retired files and manifests deleted after reader_grace
	Stopped  bool // the run ended before every tenant: a name was taken, or it was cancelled
}

// Packer runs Parquet storage for an Archive: pack runs, merges, manifests
// and the rewrite of a file a purge needs. Pack, merge and rewrite of one
// tenant run under one lock (docs/FORMAT.md, invariant 6); serve holds the
// data directory's lock, so one process is the only writer of the files.
type Packer struct {
	a   *Archive
	opt ParquetOptions

	mu     sync.Mutex
	locks  map[ids.ID]chan struct{}
	copies map[ids.ID][]string // objects of packed versions, to delete
}

// newPacker runs Parquet storage for a, whose objects must be in a
// bucket, and removes what an earlier process left in the spool.
func newPacker(a *Archive, opt ParquetOptions) (*Packer, error) {
	if a.Loc != catalog.InS3 {
		return nil, errors.New(`parquet storage packs the objects of a bucket, so it needs storage.objects = "s3"`)
	}
	if opt.PackLimit <= 0 {
		return nil, errors.New("parquet storage: the pack limit must be more than 0")
	}
	if opt.MergeTarget <= 0 {
		opt.MergeTarget = DefaultMergeTarget
	}
	if opt.MaxFileBytes <= 0 {
		opt.MaxFileBytes = DefaultMaxFileBytes
	}
	if opt.SpoolDir == "" {
		return nil, errors.New("parquet storage: no spool directory")
	}
	if err := os.MkdirAll(opt.SpoolDir, 0o700); err != nil {
		return nil, fmt.Errorf("parquet storage: %w", err)
	}
	// Only this process writes the spool while it holds the data
	// directory's lock: anything there is what a stopped run left.
	stale, _ := filepath.Glob(filepath.Join(opt.SpoolDir, spoolPrefix+"*"))
	for _, f := range stale {
		os.Remove(f)
	}
	return &Packer{a: a, opt: opt, locks: map[ids.ID]chan struct{}{}, copies: map[ids.ID][]string{}}, nil
}

// lock takes the tenant's lock: pack, merge and purge rewrites of one
// tenant never run at once (docs/FORMAT.md, invariant 6).
func (p *Packer) lock(ctx context.Context, tenant ids.ID) (func(), error) {
	p.mu.Lock()
	l, ok := p.locks[tenant]
	if !ok {
		l = make(chan struct{}, 1)
		p.locks[tenant] = l
	}
	p.mu.Unlock()
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *Packer) log(level slog.Level, msg string, args ...any) {
	if p.a.Log != nil {
		p.a.Log.Log(context.Background(), level, msg, args...)
	}
}

// Run is one pack run over every tenant (docs/FORMAT.md, "Pack run"):
// each tenant's objects are packed, oldest date first, its small files
// merged, its manifest ensured and what outlived reader_grace deleted. A
// tenant whose run fails is counted and the run goes on with the next,
// except when a new name was taken: then the run stops.
func (p *Packer) Run(ctx context.Context) PackStats {
	var st PackStats
	tenants, err := p.a.Cat.Tenants(ctx)
	if err != nil {
		if ctx.Err() != nil {
			st.Stopped = true
			return st
		}
		st.Failed++
		p.a.logError("pack run: list tenants", err)
		return st
	}
	for _, t := range tenants {
		if ctx.Err() != nil {
			st.Stopped = true
			break
		}
		err := p.runTenant(ctx, t.ID, &st)
		switch {
		case err == nil:
		case errors.Is(err, ErrNameTaken):
			st.Failed++
			st.Stopped = true
			p.log(slog.LevelError, msgNameTaken)
			return st
		case ctx.Err() != nil:
			// Stopped (the server is shutting down): not a failure; the
			// next start finishes or removes what this run left.
			st.Stopped = true
			return st
		default:
			st.Failed++
			p.a.logError("pack run: a tenant's run failed", err)
		}
	}
	return st
}

func (p *Packer) runTenant(ctx context.Context, tenant ids.ID, st *PackStats) error {
	unlock, err := p.lock(ctx, tenant)
	if err != nil {
		return err
	}
	defer unlock()
	err = p.packObjects(ctx, tenant, st)
	if err == nil {
		err = p.mergeSmall(ctx, tenant, st)
	}
	if err == nil {
		// Also when nothing was packed: stores and deletes change which
		// versions are live, and the manifest names them.
		err = p.ensureManifest(ctx, tenant)
	}
	// The objects of versions packed by a commit are copies now, whatever
	// failed after it. They go once the run's merges are done, so that an
	// operator who waits for the objects to go sees the merged files.
	if derr := p.deleteCopies(ctx, tenant); err == nil {
		err = derr
	}
	if err != nil {
		return err
	}
	return p.dropExpired(ctx, tenant, st)
}

// packObjects packs the tenant's objects, one date at a time, oldest first.
func (p *Packer) packObjects(ctx context.Context, tenant ids.ID, st *PackStats) error {
	var notBefore time.Time
	for {
		oldest, ok, err := p.a.Cat.OldestPackable(ctx, tenant, p.opt.PackLimit, notBefore)
		if err != nil || !ok {
			return err
		}
		day := time.Date(oldest.Year(), oldest.Month(), oldest.Day(), 0, 0, 0, 0, time.UTC)
		end := day.AddDate(0, 0, 1)
		var after catalog.PackCursor
		for {
			cands, next, err := p.a.Cat.Packable(ctx, tenant, day, end, p.opt.PackLimit, after, p.opt.MaxFileBytes, maxFileRows)
			if err != nil {
				return err
			}
			if len(cands) == 0 {
				break
			}
			n, err := p.packFile(ctx, tenant, day.Format(time.DateOnly), cands)
			if errors.Is(err, errAbandoned) {
				// A purge started on a chosen version: the next run packs
				// the others.
				return nil
			}
			if err != nil {
				return err
			}
			if n > 0 {
				st.Files++
				st.Versions += n
			}
			after = next
		}
		notBefore = end
	}
}

// packFile writes the candidates' objects into one new file, commits it
// and only then deletes the objects (docs/FORMAT.md, "Pack run"). It
// returns how many versions it packed.
func (p *Packer) packFile(ctx context.Context, tenant ids.ID, date string, cands []catalog.PackCandidate) (int, error) {
	a := p.a
	start := time.Now()
	fw, err := p.createFile(ctx, tenant, date, len(cands))
	if err != nil {
		return 0, err
	}
	defer fw.discard()
	keys := make([]string, len(cands))
	for i, c := range cands {
		keys[i] = ObjectKey(catalog.InS3, tenant, c.ID)
	}
	skipped := 0
	err = p.fetchInOrder(ctx, keys, func(i int, b []byte, err error) error {
		c := cands[i]
		if errors.Is(err, objstore.ErrNotFound) {
			// Damaged (check reports it) or purged meanwhile: not packed.
			skipped++
			return nil
		}
		if err != nil {
			return wrapf("pack: read object", err)
		}
		if int64(len(b)) != c.SealedSize || !sealedFor(b, c.ID) {
			skipped++
			return nil
		}
		return fw.write(parquetstore.PackRow{Version: c.ID, StoredAt: c.StoredAt, Sealed: b})
	})
	if err != nil {
		return 0, err
	}
	if skipped > 0 {
		p.log(slog.LevelWarn, "pack run left objects it could not read as they were recorded", "objects", skipped)
	}
	written := time.Now()
	locs, size, err := fw.close()
	if err != nil || len(locs) == 0 {
		return 0, err
	}
	put := time.Now()
	crashpoint.Hit(crashpoint.PackAfterPut)
	rows := make([]catalog.MovedRow, len(locs))
	for i, l := range locs {
		rows[i] = catalog.MovedRow{Version: l.Version, Offset: l.Offset, Length: l.Length}
	}
	err = a.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.CommitPack(fw.f.ID, size, rows) })
	if errors.Is(err, catalog.ErrChanged) {
		return 0, errAbandoned
	}
	if err != nil {
		return 0, wrapf("pack: commit", err)
	}
	fw.committed = true
	p.log(slog.LevelDebug, "pack file", "versions", len(rows), "bytes", size,
		"read_ms", written.Sub(start).Milliseconds(), "put_ms", put.Sub(written).Milliseconds(), "commit_ms", time.Since(put).Milliseconds())
	crashpoint.Hit(crashpoint.PackAfterCommit)
	if err := p.ensureManifest(ctx, tenant); err != nil {
		return len(rows), err
	}
	// Only now are the objects copies, to be deleted (deleteCopies). A
	// reader that resolved one before the commit finds it gone and looks
	// again (invariant 7).
	p.mu.Lock()
	for _, r := range rows {
		p.copies[tenant] = append(p.copies[tenant], ObjectKey(catalog.InS3, tenant, r.Version))
	}
	many := len(p.copies[tenant]) >= maxCopies
	p.mu.Unlock()
	if many {
		if err := p.deleteCopies(ctx, tenant); err != nil {
			return len(rows), err
		}
	}
	return len(rows), nil
}

// deleteCopies deletes the objects of the tenant's versions packed since
// the last call; those it fails to delete are tried again by the next run
// (and at the next start by recovery).
func (p *Packer) deleteCopies(ctx context.Context, tenant ids.ID) error {
	p.mu.Lock()
	keys := p.copies[tenant]
	delete(p.copies, tenant)
	p.mu.Unlock()
	if len(keys) == 0 {
		return nil
	}
	start := time.Now()
	failed := p.deleteAll(ctx, keys)
	p.log(slog.LevelDebug, "pack run deleted objects", "objects", len(keys)-len(failed), "ms", time.Since(start).Milliseconds())
	if len(failed) > 0 {
		p.mu.Lock()
		p.copies[tenant] = append(p.copies[tenant], failed...)
		p.mu.Unlock()
		return fmt.Errorf("pack: %d object(s) of packed versions could not be deleted", len(failed))
	}
	crashpoint.Hit(crashpoint.PackAfterDeletes)
	return nil
}

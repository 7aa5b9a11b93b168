package archive

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/ids"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/parquetstore"
	"github.com/vcon-server/vcon-server/seal"
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

	maxFileRows   = 1 << 20
	maxCopies     = 100000 // objects of packed versions held before they are deleted
	spoolPrefix   = "pack-"
	fetchBudget   = 64 << 20 // sealed bytes fetched ahead of the writer
	maxFetchAhead = 16
	deleteWorkers = 16

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
// tenant run under one lock (docs/FORMAT.md, invariant 6); serve holds the data directory's
// lock, so one process is the only writer of the files.
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
		var after ids.ID
		for {
			cands, err := p.a.Cat.Packable(ctx, tenant, day, end, p.opt.PackLimit, after, p.opt.MaxFileBytes, maxFileRows)
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
			after = cands[len(cands)-1].ID
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

// sealedFor reports whether b starts with the sealed header of version.
func sealedFor(b []byte, version ids.ID) bool {
	v, err := seal.HeaderVersion(bytes.NewReader(b))
	return err == nil && ids.ID(v) == version
}

// fileWriter is a new pack file: recorded pending, then written through an
// upload that spools it locally, then PUT create-only.
type fileWriter struct {
	p         *Packer
	f         catalog.PackFile
	up        objstore.Upload
	buf       *bufio.Writer
	pw        *parquetstore.PackWriter
	put       bool // the PUT succeeded, or may have: the object is ours
	committed bool // the catalog names it: never discard it
}

// createFile records a new file pending before anything is written to the
// bucket (docs/FORMAT.md, "Pack run" step 2): a crash after its PUT leaves
// a row naming it, and start-up recovery deletes it.
func (p *Packer) createFile(ctx context.Context, tenant ids.ID, date string, rows int) (*fileWriter, error) {
	a := p.a
	f := catalog.PackFile{ID: ids.NewV7(a.now()), Tenant: tenant, Date: date, Rows: int64(rows)}
	f.Key = PackKey(tenant, date, f.ID)
	if err := a.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.AddPendingPack(f) }); err != nil {
		return nil, wrapf("pack: record a new file", err)
	}
	fw := &fileWriter{p: p, f: f}
	up, err := a.Objects.Upload(ctx, f.Key, true)
	if err != nil {
		fw.discard()
		return nil, wrapf("pack: start a new file", err)
	}
	fw.up = up
	fw.buf = bufio.NewWriterSize(up, 1<<20)
	fw.pw = parquetstore.NewPackWriter(fw.buf)
	return fw, nil
}

func (fw *fileWriter) write(r parquetstore.PackRow) error { return fw.pw.Write(r) }

// close ends the file and PUTs it create-only. With no row written it
// PUTs nothing and returns no location.
func (fw *fileWriter) close() ([]parquetstore.Location, int64, error) {
	locs, size, err := fw.pw.Close()
	if err != nil {
		return nil, 0, err
	}
	if len(locs) == 0 {
		return nil, 0, nil
	}
	if err := fw.buf.Flush(); err != nil {
		return nil, 0, wrapf("pack: spool a new file", err)
	}
	if err := fw.up.Commit(); err != nil {
		if errors.Is(err, objstore.ErrExists) {
			return nil, 0, ErrNameTaken
		}
		// The PUT may have taken effect with its answer lost: the name is
		// fresh, so whatever is there is ours to delete.
		fw.put = true
		return nil, 0, wrapf("pack: put a new file", err)
	}
	fw.put = true
	return locs, size, nil
}

// discard removes an uncommitted file: its object (only when this process
// PUT it: a name found taken belongs to another writer), then its pending
// row. When the delete fails the row stays, for start-up recovery.
func (fw *fileWriter) discard() {
	if fw.committed {
		return
	}
	a := fw.p.a
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if fw.up != nil {
		fw.up.Abort()
	}
	if fw.put {
		if err := a.Objects.Delete(ctx, fw.f.Key); err != nil {
			a.logError("pack: delete an abandoned file", err)
			return
		}
	}
	id := fw.f.ID
	if err := a.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.RemovePendingPack(id) }); err != nil {
		a.logError("pack: forget an abandoned file", err)
	}
	fw.committed = true // discarded: nothing more to do
}

// fetchInOrder reads the objects keys[i] a few at a time ahead of fn, which
// gets them in order, one at a time; no more than fetchBudget sealed bytes
// (at least one object) are held at once. An error from fn stops it.
func (p *Packer) fetchInOrder(ctx context.Context, keys []string, fn func(i int, b []byte, err error) error) error {
	type result struct {
		b   []byte
		err error
	}
	ahead := int(min(int64(maxFetchAhead), max(1, fetchBudget/p.opt.PackLimit)))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queue := make(chan chan result, ahead-1)
	go func() {
		defer close(queue)
		for _, key := range keys {
			ch := make(chan result, 1)
			select {
			case queue <- ch:
			case <-ctx.Done():
				return
			}
			go func() {
				b, err := p.readObject(ctx, key)
				ch <- result{b, err}
			}()
		}
	}()
	i := 0
	var ferr error
	for ch := range queue {
		r := <-ch
		if ferr == nil {
			if ferr = fn(i, r.b, r.err); ferr != nil {
				cancel()
			}
		}
		i++
	}
	if ferr == nil && i < len(keys) {
		ferr = ctx.Err()
	}
	return ferr
}

// readObject reads a whole object of at most the pack limit.
func (p *Packer) readObject(ctx context.Context, key string) ([]byte, error) {
	rc, err := p.a.Objects.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, p.opt.PackLimit+1))
}

// deleteAll deletes the keys, several at once, and returns those whose
// delete failed.
func (p *Packer) deleteAll(ctx context.Context, keys []string) []string {
	var mu sync.Mutex
	var failed []string
	work := make(chan string)
	var wg sync.WaitGroup
	for w := 0; w < min(deleteWorkers, len(keys)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for key := range work {
				if err := p.a.Objects.Delete(ctx, key); err != nil {
					mu.Lock()
					failed = append(failed, key)
					mu.Unlock()
				}
			}
		}()
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	return failed
}

// mergeSmall merges each date's small live files into one (docs/FORMAT.md,
// "Merge"). A file holding a row whose purge started is left to the purge,
// which rewrites it anyway.
func (p *Packer) mergeSmall(ctx context.Context, tenant ids.ID, st *PackStats) error {
	files, err := p.a.Cat.PackFiles(ctx, tenant, catalog.PackLive)
	if err != nil {
		return err
	}
	purging, err := p.a.Cat.FilesWithPurges(ctx, tenant)
	if err != nil {
		return err
	}
	var dates []string
	small := map[string][]catalog.PackFile{}
	for _, f := range files {
		if f.Bytes >= p.opt.MergeTarget || purging[f.ID] {
			continue
		}
		if _, ok := small[f.Date]; !ok {
			dates = append(dates, f.Date)
		}
		small[f.Date] = append(small[f.Date], f)
	}
	for _, date := range dates {
		var sel []catalog.PackFile
		var total int64
		for _, f := range small[date] {
			if len(sel) >= 2 && total+f.Bytes > p.opt.MaxFileBytes {
				break
			}
			sel = append(sel, f)
			total += f.Bytes
		}
		if len(sel) < 2 {
			continue
		}
		err := p.mergeFiles(ctx, tenant, date, sel)
		if errors.Is(err, errAbandoned) {
			continue
		}
		if err != nil {
			return err
		}
		st.Merged++
	}
	return nil
}

type spooled struct {
	f    catalog.PackFile
	file *os.File
}

// download copies a pack file into the spool, checking its size against
// the catalog's. The caller removes it with release.
func (p *Packer) download(ctx context.Context, f catalog.PackFile) (*spooled, error) {
	tmp, err := os.CreateTemp(p.opt.SpoolDir, spoolPrefix+"*.parquet")
	if err != nil {
		return nil, fmt.Errorf("pack: spool: %w", err)
	}
	s := &spooled{f: f, file: tmp}
	rc, err := p.a.Objects.Get(ctx, f.Key)
	if err != nil {
		s.release()
		return nil, wrapf("pack: read a pack file", err)
	}
	n, err := io.Copy(tmp, rc)
	rc.Close()
	if err != nil {
		s.release()
		return nil, wrapf("pack: read a pack file", err)
	}
	if n != f.Bytes {
		s.release()
		return nil, fmt.Errorf("pack: a pack file holds %d bytes, the catalog records %d: %w", n, f.Bytes, ErrDamaged)
	}
	return s, nil
}

func (s *spooled) release() {
	s.file.Close()
	os.Remove(s.file.Name())
}

// copyRows writes rows read from their spooled files into fw, in version
// order, checking that each is the sealed object of its version.
func copyRows(fw *fileWriter, rows []spoolRow) error {
	sort.Slice(rows, func(i, j int) bool { return bytes.Compare(rows[i].r.Version[:], rows[j].r.Version[:]) < 0 })
	var buf []byte
	for _, row := range rows {
		if int64(cap(buf)) < row.r.Length {
			buf = make([]byte, row.r.Length)
		}
		b := buf[:row.r.Length]
		if _, err := row.src.file.ReadAt(b, row.r.Offset); err != nil {
			return fmt.Errorf("pack: read a row of a spooled file: %w", err)
		}
		if !sealedFor(b, row.r.Version) {
			return fmt.Errorf("pack: a row is not where the catalog places it: %w", ErrDamaged)
		}
		if err := fw.write(parquetstore.PackRow{Version: row.r.Version, StoredAt: row.r.StoredAt, Sealed: b}); err != nil {
			return err
		}
	}
	return nil
}

type spoolRow struct {
	r   catalog.PackRow
	src *spooled
}

// mergeFiles writes the rows of the files sel into one new file, commits
// it (the sources retired) and ensures the manifest.
func (p *Packer) mergeFiles(ctx context.Context, tenant ids.ID, date string, sel []catalog.PackFile) error {
	a := p.a
	var rows []spoolRow
	for _, f := range sel {
		s, err := p.download(ctx, f)
		if err != nil {
			return err
		}
		defer s.release()
		rs, err := a.Cat.PackRows(ctx, f.ID)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.Purge != catalog.Kept {
				return errAbandoned
			}
			rows = append(rows, spoolRow{r, s})
		}
	}
	fw, err := p.createFile(ctx, tenant, date, len(rows))
	if err != nil {
		return err
	}
	defer fw.discard()
	if err := copyRows(fw, rows); err != nil {
		return err
	}
	locs, size, err := fw.close()
	if err != nil {
		return err
	}
	crashpoint.Hit(crashpoint.MergeAfterPut)
	from := make(map[ids.ID]ids.ID, len(rows))
	for _, r := range rows {
		from[r.r.Version] = r.src.f.ID
	}
	moved := make([]catalog.MovedRow, len(locs))
	for i, l := range locs {
		moved[i] = catalog.MovedRow{Version: l.Version, Offset: l.Offset, Length: l.Length}
	}
	err = a.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.CommitMerge(fw.f.ID, size, from, moved) })
	if errors.Is(err, catalog.ErrChanged) {
		return errAbandoned
	}
	if err != nil {
		return wrapf("merge: commit", err)
	}
	fw.committed = true
	crashpoint.Hit(crashpoint.MergeAfterCommit)
	return p.ensureManifest(ctx, tenant)
}

// dropExpired deletes the retired files and superseded manifests whose
// reader grace is over. A retired file's grace runs from the first
// manifest written without it, so a reader on the manifest before always
// has reader_grace to read it.
func (p *Packer) dropExpired(ctx context.Context, tenant ids.ID, st *PackStats) error {
	a := p.a
	now := a.now()
	ms, err := a.Cat.Manifests(ctx, tenant)
	if err != nil {
		return err
	}
	retired, err := a.Cat.PackFiles(ctx, tenant, catalog.PackRetired)
	if err != nil {
		return err
	}
	for _, f := range retired {
		var since *time.Time
		for _, m := range ms {
			if f.RetiredAt != nil && !m.CreatedAt.Before(*f.RetiredAt) {
				since = &m.CreatedAt
				break
			}
		}
		if since == nil || now.Before(since.Add(p.opt.ReaderGrace)) {
			continue
		}
		if err := a.Objects.Delete(ctx, f.Key); err != nil {
			return wrapf("pack: delete a retired file", err)
		}
		id := f.ID
		if err := a.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.ForgetPackFile(id, catalog.PackRetired) }); err != nil {
			return err
		}
		st.Dropped++
	}
	var gone []int64
	for i := 0; i+1 < len(ms); i++ {
		if now.Before(ms[i+1].CreatedAt.Add(p.opt.ReaderGrace)) {
			break
		}
		if err := a.Objects.Delete(ctx, ManifestKey(tenant, ms[i].Seq)); err != nil {
			return wrapf("pack: delete a superseded manifest", err)
		}
		gone = append(gone, ms[i].Seq)
	}
	if len(gone) == 0 {
		return nil
	}
	st.Dropped += len(gone)
	return a.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.ForgetManifests(tenant, gone) })
}

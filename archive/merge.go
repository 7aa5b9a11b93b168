package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/parquetstore"
)

// mergeSmall merges each date's small live files into one (docs/FORMAT.md,
// "Merge"), as chooseMerges plans.
func (p *Packer) mergeSmall(ctx context.Context, tenant ids.ID, st *PackStats) error {
	files, err := p.a.Cat.PackFiles(ctx, tenant, catalog.PackLive)
	if err != nil {
		return err
	}
	purging, err := p.a.Cat.FilesWithPurges(ctx, tenant)
	if err != nil {
		return err
	}
	for _, sel := range chooseMerges(files, purging, p.opt.MergeTarget, p.opt.MaxFileBytes) {
		err := p.mergeFiles(ctx, tenant, sel[0].Date, sel)
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

// chooseMerges plans a tenant's merges from its live files, in the order
// listed: per date, the small files (under target bytes) taken in turn
// while the merged file stays within maxBytes (two are taken whatever
// their size), merged when there are two or more. A file holding a row
// whose purge started (purging) is left to the purge, which rewrites it
// anyway.
func chooseMerges(files []catalog.PackFile, purging map[ids.ID]bool, target, maxBytes int64) [][]catalog.PackFile {
	var dates []string
	small := map[string][]catalog.PackFile{}
	for _, f := range files {
		if f.Bytes >= target || purging[f.ID] {
			continue
		}
		if _, ok := small[f.Date]; !ok {
			dates = append(dates, f.Date)
		}
		small[f.Date] = append(small[f.Date], f)
	}
	var out [][]catalog.PackFile
	for _, date := range dates {
		var sel []catalog.PackFile
		var total int64
		for _, f := range small[date] {
			if len(sel) >= 2 && total+f.Bytes > maxBytes {
				break
			}
			sel = append(sel, f)
			total += f.Bytes
		}
		if len(sel) >= 2 {
			out = append(out, sel)
		}
	}
	return out
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

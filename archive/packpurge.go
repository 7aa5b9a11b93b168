package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
)

const msgLostRows = "a pack file a purge must rewrite is gone, and no other file holds its other rows; check reports them damaged"

// maxRewriteRounds bounds how often one purge writes a file again because
// another purge changed it meanwhile; the next sweep goes on.
const maxRewriteRounds = 4

var (
	errStillThere = errors.New("purge: " + msgStillThere)
	errRounds     = errors.New("purge: " + msgRounds)
)

// purgeRow removes the sealed bytes of a packed version whose key is
// destroyed (docs/FORMAT.md, "Purge of a packed row"): under the tenant's
// lock it writes the file again without every purged row, commits, ensures
// the manifest, deletes the old file with every retired file and
// superseded manifest of the tenant, proves them gone, and only then
// records the purge done. A version another call finished is done.
func (p *Packer) purgeRow(ctx context.Context, v catalog.Version) error {
	unlock, err := p.lock(ctx, v.Tenant)
	if err != nil {
		return err
	}
	defer unlock()
	a := p.a
	for round := 0; round < maxRewriteRounds; round++ {
		cur, err := a.Cat.Version(ctx, v.ID)
		if errors.Is(err, catalog.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if cur.Purge != catalog.KeyDestroyed {
			return errors.New("purge: the version's key is not destroyed")
		}
		if cur.Location != catalog.Packed || cur.PackFile == nil {
			return errors.New("purge: the version is no longer packed")
		}
		f, err := a.Cat.PackFileByID(ctx, *cur.PackFile)
		if err != nil {
			return wrapf("purge: find the pack file", err)
		}
		if f.State == catalog.PackLive {
			err := p.rewrite(ctx, f)
			if errors.Is(err, errAbandoned) {
				continue // another purge changed the file: read it again
			}
			if err != nil {
				return err
			}
		}
		return p.finishDeletes(ctx, v.Tenant)
	}
	p.log(slog.LevelWarn, msgRounds)
	return errRounds
}

// rewrite writes f again without its purged rows under a new name, and
// commits: the new file live (none when no row is left), f and the
// tenant's retired files to be deleted.
func (p *Packer) rewrite(ctx context.Context, f catalog.PackFile) error {
	a := p.a
	rows, err := a.Cat.PackRows(ctx, f.ID)
	if err != nil {
		return err
	}
	var kept []catalog.PackRow
	var purged []ids.ID
	for _, r := range rows {
		if r.Purge == catalog.Kept {
			kept = append(kept, r)
		} else {
			purged = append(purged, r.Version)
		}
	}
	if len(purged) == 0 {
		return errAbandoned
	}
	var newID *ids.ID
	var size int64
	var moved []catalog.MovedRow
	if len(kept) > 0 {
		src, err := p.download(ctx, f)
		if errors.Is(err, objstore.ErrNotFound) {
			// The file is gone, and start-up recovery found its kept rows
			// in no other file: their bytes are nowhere, and check reports
			// them damaged. The purge goes on without them.
			p.log(slog.LevelError, msgLostRows, "rows", len(kept))
			err := a.Cat.Update(ctx, func(tx *catalog.Tx) error {
				if err := tx.LoseRows(f.ID); err != nil {
					return err
				}
				return tx.CommitRewrite(f.Tenant, f.ID, nil, 0, nil, purged)
			})
			if errors.Is(err, catalog.ErrChanged) {
				return errAbandoned
			}
			return err
		}
		if err != nil {
			return err
		}
		defer src.release()
		fw, err := p.createFile(ctx, f.Tenant, f.Date, len(kept))
		if err != nil {
			return err
		}
		defer fw.discard()
		srows := make([]spoolRow, len(kept))
		for i, r := range kept {
			srows[i] = spoolRow{r, src}
		}
		if err := copyRows(fw, srows); err != nil {
			return err
		}
		locs, n, err := fw.close()
		if errors.Is(err, ErrNameTaken) {
			p.log(slog.LevelError, msgNameTaken)
		}
		if err != nil {
			return err
		}
		crashpoint.Hit(crashpoint.RewriteAfterPut)
		size = n
		id := fw.f.ID
		newID = &id
		moved = make([]catalog.MovedRow, len(locs))
		for i, l := range locs {
			moved[i] = catalog.MovedRow{Version: l.Version, Offset: l.Offset, Length: l.Length}
		}
		err = a.Cat.Update(ctx, func(tx *catalog.Tx) error {
			return tx.CommitRewrite(f.Tenant, f.ID, newID, size, moved, purged)
		})
		if errors.Is(err, catalog.ErrChanged) {
			return errAbandoned
		}
		if err != nil {
			return wrapf("purge: commit the rewrite", err)
		}
		fw.committed = true
	} else {
		err := a.Cat.Update(ctx, func(tx *catalog.Tx) error {
			return tx.CommitRewrite(f.Tenant, f.ID, nil, 0, nil, purged)
		})
		if errors.Is(err, catalog.ErrChanged) {
			return errAbandoned
		}
		if err != nil {
			return wrapf("purge: commit the rewrite", err)
		}
	}
	crashpoint.Hit(crashpoint.RewriteAfterCommit)
	return nil
}

// finishDeletes deletes, at once, every file of the tenant that is to be
// deleted (rewritten, or retired and so possibly holding a purged row),
// every superseded manifest and each purged row's pre-pack object; proves
// each gone; and only then records the purges done (invariant 4).
func (p *Packer) finishDeletes(ctx context.Context, tenant ids.ID) error {
	a := p.a
	if err := p.ensureManifest(ctx, tenant); err != nil {
		return err
	}
	if err := a.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.DeleteRetired(tenant) }); err != nil {
		return err
	}
	files, err := a.Cat.PackFiles(ctx, tenant, catalog.PackDeleting)
	if err != nil {
		return err
	}
	fileIDs := make([]ids.ID, len(files))
	for i, f := range files {
		fileIDs[i] = f.ID
	}
	purged, err := a.Cat.PurgedIn(ctx, fileIDs)
	if err != nil {
		return err
	}
	ms, err := a.Cat.Manifests(ctx, tenant)
	if err != nil {
		return err
	}
	var oldSeqs []int64
	for i := 0; i+1 < len(ms); i++ {
		oldSeqs = append(oldSeqs, ms[i].Seq)
	}
	// The tombstones go first, so that a catalog restored from an older
	// backup destroys these keys again, after storage's purge count
	// (docs/FORMAT.md, "Purge of an object").
	if len(purged) > 0 {
		if err := a.raisePurgeCount(ctx); err != nil {
			return err
		}
	}
	for _, id := range purged {
		err := objstore.Put(ctx, a.Objects, TombstoneKey(a.Loc, tenant, id), bytes.NewReader(nil), false)
		if err != nil {
			return wrapf("purge: write tombstone", err)
		}
	}
	var targets []string
	for _, f := range files {
		targets = append(targets, f.Key)
	}
	for _, s := range oldSeqs {
		targets = append(targets, ManifestKey(tenant, s))
	}
	for _, id := range purged {
		targets = append(targets, ObjectKey(catalog.InS3, tenant, id))
	}
	if failed := p.deleteAll(ctx, targets); len(failed) > 0 {
		return fmt.Errorf("purge: %d pack file(s), manifest(s) or object(s) could not be deleted", len(failed))
	}
	crashpoint.Hit(crashpoint.RewriteAfterDelete)
	// A DELETE that succeeded proves nothing: a versioned bucket keeps the
	// bytes (invariant 5).
	for _, key := range targets {
		_, err := a.Objects.Stat(ctx, key)
		if errors.Is(err, objstore.ErrNotFound) {
			continue
		}
		if err == nil {
			p.log(slog.LevelError, msgStillThere)
			return errStillThere
		}
		return wrapf("purge: prove a pack file gone", err)
	}
	return a.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.FinishPackPurge(tenant, fileIDs, oldSeqs) })
}

// recoverPacks repairs what a cut-off pack run, merge or rewrite left
// (docs/FORMAT.md, "Pack run", invariant 1): a pending file is deleted and
// forgotten. The objects of versions already packed are left to Look. A
// pack file no row names at all is left alone: after a catalog restore it
// may hold the only copy of rows the catalog can still open; check reports
// it.
func (a *Archive) recoverPacks(ctx context.Context) (files int, err error) {
	if a.Loc != catalog.InS3 {
		return 0, nil
	}
	pending, err := a.Cat.PackFilesIn(ctx, catalog.PackPending)
	if err != nil {
		return 0, err
	}
	for _, f := range pending {
		if err := a.Objects.Delete(ctx, f.Key); err != nil {
			return files, wrapf("recovery: delete a pending pack file", err)
		}
		id := f.ID
		if err := a.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.RemovePendingPack(id) }); err != nil {
			return files, err
		}
		files++
	}
	if files > 0 && a.Log != nil {
		a.Log.Info(msgRecoveryFiles, "removed", files)
	}
	return files, nil
}

// ensureManifests ensures the manifest of every tenant that has pack files
// or manifests: a crash between a commit and its manifest's PUT heals here.
func (a *Archive) ensureManifests(ctx context.Context) error {
	p := a.packer
	if p == nil {
		return nil
	}
	tenants, err := a.Cat.TenantsWithPackFiles(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range tenants {
		unlock, err := p.lock(ctx, t)
		if err != nil {
			return err
		}
		errs = append(errs, p.ensureManifest(ctx, t))
		unlock()
	}
	return errors.Join(errs...)
}

// UnnamedPackFiles lists the keys of the tenant's pack files in the bucket
// that no catalog row names, in any state. Nothing deletes them on its own
// (invariant 1): check reports them, and an operator who knows where they
// came from (a catalog restored from an older backup, a second server on
// the same prefix) decides.
func (a *Archive) UnnamedPackFiles(ctx context.Context, tenant ids.ID) ([]string, error) {
	files, err := a.Cat.PackFiles(ctx, tenant)
	if err != nil {
		return nil, err
	}
	named := make(map[string]bool, len(files))
	for _, f := range files {
		named[f.Key] = true
	}
	var out []string
	err = a.Objects.List(ctx, kindPrefix(catalog.InS3, kindParquet, tenant), func(info objstore.Info) error {
		if !named[info.Key] {
			out = append(out, info.Key)
		}
		return nil
	})
	if err != nil {
		return nil, wrapf("list pack files", err)
	}
	return out, nil
}

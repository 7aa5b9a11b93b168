package archive

import (
	"context"
	"errors"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/ids"
	"github.com/vcon-server/vcon-server/objstore"
)

// Recovery counts what a start-up recovery repaired.
type Recovery struct {
	Temps       int // temporary files a crash left
	Orphans     int // objects no catalog row names
	Tombstoned  int // keys destroyed again from storage tombstones
	PurgesEnded int // unfinished purges finished
	PackFiles   int // pending pack files deleted (Parquet storage)
	PackCopies  int // objects of versions already packed, deleted
	Adopted     int // pack files a restored catalog did not name, adopted
	Repointed   int // versions whose rows now name an adopted file
}

// Recover repairs what a crash can leave (docs/FORMAT.md, "Recovery"). It
// runs at start, while this process holds the data directory's lock, so no
// store is in flight: every object no row names was written by a request
// that never committed, and its key was never kept (invariant 2).
func (a *Archive) Recover(ctx context.Context) (Recovery, error) {
	var rec Recovery
	if d, ok := a.Objects.(interface {
		RemoveStaleTemps(time.Duration) (int, error)
	}); ok {
		n, err := d.RemoveStaleTemps(0)
		if err != nil {
			return rec, err
		}
		rec.Temps = n
	}
	tenants, err := a.Cat.Tenants(ctx)
	if err != nil {
		return rec, err
	}
	for _, t := range tenants {
		n, err := a.reapplyTombstones(ctx, t.ID)
		if err != nil {
			return rec, err
		}
		rec.Tombstoned += n
		n, err = a.removeOrphans(ctx, t.ID, a.now())
		if err != nil {
			return rec, err
		}
		rec.Orphans += n
	}
	if rec.Adopted, rec.Repointed, err = a.adoptRestored(ctx); err != nil {
		return rec, err
	}
	if rec.PackFiles, rec.PackCopies, err = a.recoverPacks(ctx); err != nil {
		return rec, err
	}
	n, err := a.Sweep(ctx)
	rec.PurgesEnded = n
	if err != nil {
		return rec, err
	}
	// A manifest a crash kept from being written is written now; a failure
	// here leaves it to the first pack run, which ensures it again.
	if err := a.ensureManifests(ctx); err != nil {
		a.logError("start-up recovery: ensure the manifests", err)
	}
	return rec, nil
}

// reapplyTombstones destroys the key of every version that storage says was
// purged but the catalog can still open: the catalog was restored from a
// backup taken before the purge.
func (a *Archive) reapplyTombstones(ctx context.Context, tenant ids.ID) (int, error) {
	var found []ids.ID
	err := a.Objects.List(ctx, kindPrefix(a.Loc, kindPurged, tenant), func(info objstore.Info) error {
		id, ok := versionOf(info.Key)
		if !ok {
			return nil
		}
		v, err := a.Cat.Version(ctx, id)
		if errors.Is(err, catalog.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if v.Purge == catalog.Kept {
			found = append(found, id)
		}
		return nil
	})
	if err != nil || len(found) == 0 {
		return 0, err
	}
	n := 0
	err = a.Cat.Update(ctx, func(tx *catalog.Tx) error {
		for _, id := range found {
			ok, err := tx.DestroyKeyOf(id)
			if err != nil {
				return err
			}
			if ok {
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, a.checkpoint(ctx)
}

// removeOrphans deletes the tenant's objects that no row names and whose
// version id was made before cutoff.
func (a *Archive) removeOrphans(ctx context.Context, tenant ids.ID, cutoff time.Time) (int, error) {
	var orphans []string
	err := a.Objects.List(ctx, kindPrefix(a.Loc, kindObjects, tenant), func(info objstore.Info) error {
		id, ok := versionOf(info.Key)
		if !ok || ids.Time(id).After(cutoff) {
			return nil
		}
		ok, err := a.Cat.Exists(ctx, id)
		if err != nil {
			return err
		}
		if !ok {
			orphans = append(orphans, info.Key)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, key := range orphans {
		if err := a.Objects.Delete(ctx, key); err != nil {
			return 0, wrapf("recovery: delete orphan object", err)
		}
	}
	return len(orphans), nil
}

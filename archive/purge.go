package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/reserve"
	"github.com/vcon-server/vcon-server/objstore"
)

// Delete hides every version of a vCon (DELETE /vcons/{uuid}). With a
// retention of 0d every version, those hidden before included, is purged
// before it returns, to the end, whoever destroyed their keys; when that
// purge stops after the keys were destroyed it returns ErrPurgeIncomplete:
// the vCon is unreadable, the sweep removes the rest.
func (a *Archive) Delete(ctx context.Context, tenant, uuid ids.ID) error {
	var hid []ids.ID
	var purgeNow bool
	err := a.Cat.Update(ctx, func(tx *catalog.Tx) error {
		var err error
		if hid, err = tx.Hide(tenant, uuid); err != nil {
			return err
		}
		t, err := tx.Tenant(tenant)
		if err != nil {
			return err
		}
		purgeNow = a.retention(t) == 0
		if purgeNow {
			// Every version goes, those an earlier PUT hid included: a 0d
			// tenant keeps nothing hidden (docs/retention-and-holds.md).
			hid, err = tx.VersionIDs(tenant, uuid)
		}
		return err
	})
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return ErrNotFound
	case reserve.IsFull(err):
		a.logError("delete: the disk is full", err)
		return ErrDeleteNoSpace
	case err != nil:
		return err
	case !purgeNow:
		return nil
	}
	destroyed, err := a.purge(ctx, hid)
	if reserve.IsFull(err) {
		// Hidden already, whatever was destroyed: the sweep purges the
		// rest once there is room.
		a.logError("delete: purge waits for room on the disk", err)
		return ErrPurgeNoSpace
	}
	if err != nil {
		if len(destroyed) > 0 {
			a.logError("delete: purge left work for the sweep", err)
			if errors.Is(err, errForget) {
				// The replica, not storage, is what failed: a refusal
				// to retry (503), as every write's while it is behind.
				return ErrPurgeAwaitsReplica
			}
			return ErrPurgeIncomplete
		}
		return err
	}
	if err := a.finishOthersPurges(ctx, hid, destroyed); err != nil {
		a.logError("delete: purge left work for the sweep", err)
		if reserve.IsFull(err) {
			return ErrPurgeNoSpace
		}
		return ErrPurgeIncomplete
	}
	return nil
}

var (
	// ErrDeleteNoSpace: the DELETE's own commit was refused for space,
	// the reserve spent (internal/reserve); nothing changed.
	ErrDeleteNoSpace = errors.New("the catalog could not commit the delete: the data directory's disk is full and its reserve is spent; free space there (grow the file system, or remove files that are not vcon-server's), then send the DELETE again")
	// ErrPurgeNoSpace: a 0d DELETE hid the vCon, but a write of its purge
	// before its delete (the catalog's, the purge count, the tombstone)
	// was refused for space, the reserve spent.
	ErrPurgeNoSpace = errors.New("the vCon is deleted and can no longer be read by the API, but the catalog could not commit the rest of its purge: the data directory's disk is full and its reserve is spent; free space there (grow the file system, or remove files that are not vcon-server's) and the purge sweep finishes it")
)

// finishOthersPurges is the rest of a 0d DELETE's purge: the versions it
// hid whose key another purge (the sweep's) destroyed first. The answer
// waits until their bytes are proven gone too, whoever started the purge
// (docs/FORMAT.md, "Delete"): each joins the finish under way in this
// process, or is finished here, since steps 2 to 5 are safe to repeat.
func (a *Archive) finishOthersPurges(ctx context.Context, hid []ids.ID, mine []catalog.Version) error {
	done := make(map[ids.ID]bool, len(mine))
	for _, v := range mine {
		done[v.ID] = true
	}
	var started []catalog.Version
	for _, id := range hid {
		if done[id] {
			continue
		}
		v, err := a.Cat.Version(ctx, id)
		if errors.Is(err, catalog.ErrNotFound) {
			continue // purged to the end already
		}
		if err != nil {
			return err
		}
		if v.Purge == catalog.KeyDestroyed {
			started = append(started, v)
		} // else kept: held or retention changed since the hide, as before
	}
	if len(started) == 0 {
		return nil
	}
	// The purge that destroyed these keys may not have pushed that out of
	// the log yet (invariant 4), nor out of the replica: step 1 ends only
	// once both hold the keys no more, whoever destroyed them.
	if err := a.checkpoint(ctx); err != nil {
		return err
	}
	if err := a.forget(ctx); err != nil {
		return err
	}
	var errs []error
	for _, v := range started {
		if err := a.finishVersion(ctx, v); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Purge purges those of the given versions that may be purged now (hidden,
// not held, past retention, checked again inside the key's transaction).
// It returns how many keys it destroyed. An error after that means some
// bytes remain; the versions stay in the "key destroyed" state and Sweep
// or the next start finishes them.
func (a *Archive) Purge(ctx context.Context, versions []ids.ID) (int, error) {
	destroyed, err := a.purge(ctx, versions)
	return len(destroyed), err
}

// purge is Purge, returning the versions whose key it destroyed, in the
// steps of docs/FORMAT.md, "Purge of an object".
func (a *Archive) purge(ctx context.Context, versions []ids.ID) ([]catalog.Version, error) {
	if len(versions) == 0 {
		return nil, nil
	}
	// 1. Transaction: the keys destroyed, the purges counted and audited.
	var destroyed []catalog.Version
	err := a.Cat.Update(ctx, func(tx *catalog.Tx) error {
		var err error
		if destroyed, err = tx.DestroyKeys(versions, a.DefaultRetention); err != nil {
			return err
		}
		if len(destroyed) > 0 {
			// Counted in the transaction that destroys the keys: the count
			// storage gets before the tombstones (docs/FORMAT.md, "Purge
			// of an object").
			if _, err := tx.CountPurge(); err != nil {
				return err
			}
		}
		for _, v := range destroyed {
			err := tx.Audit(v.Tenant, catalog.Record{Actor: "server", Label: "retention", Action: "purge", Target: v.UUID.String(), Status: 200})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrapf("purge: destroy keys", err)
	}
	if len(destroyed) == 0 {
		return nil, nil
	}
	return destroyed, a.finishBatch(ctx, destroyed)
}

// finishBatch is the rest of the purge of the versions one key
// transaction destroyed (a purge's, or an erasure's; docs/FORMAT.md,
// "Purge of an object"): the end of step 1, the log checkpointed and the
// replica rolled over, then steps 2 to 5 for each version.
func (a *Archive) finishBatch(ctx context.Context, destroyed []catalog.Version) error {
	if a.Purged != nil {
		a.Purged(len(destroyed))
	}
	if err := a.checkpoint(ctx); err != nil {
		return err
	}
	if err := a.forget(ctx); err != nil {
		return err
	}
	crashpoint.Hit(crashpoint.PurgeAfterKey)
	var errs []error
	for _, v := range destroyed {
		if err := a.finishVersion(ctx, v); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkpoint pushes the key deletion out of the WAL, bounded in time so a
// reader holding a snapshot cannot stall a request forever.
func (a *Archive) checkpoint(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return a.Cat.Checkpoint(cctx)
}

// errForget wraps a replica's failure to forget destroyed keys: the purges
// wait, and the server runs on (start-up recovery does not stop on it).
var errForget = errors.New("purge: the catalog's replica still holds destroyed keys")

// forget rolls the replica over, so no replica object keeps a key this
// process destroyed (docs/FORMAT.md, "Replica rollover").
func (a *Archive) forget(ctx context.Context) error {
	if a.Replica == nil {
		return nil
	}
	if err := a.Replica.Forget(ctx); err != nil {
		return fmt.Errorf("%w: %w", errForget, err)
	}
	return nil
}

// purgeFlights are the purges this process is finishing, by version, so
// that a second caller (a 0d DELETE and the sweep, on one version) waits
// for the first rather than repeating its deletes beside it.
type purgeFlights struct {
	mu sync.Mutex
	m  map[ids.ID]*purgeFlight
}

// purgeFlight is one removeBytes under way; err is set before done closes.
type purgeFlight struct {
	done chan struct{}
	err  error
}

// enter returns the flight finishing id, and whether the caller made it
// and so must run it and leave.
func (fs *purgeFlights) enter(id ids.ID) (*purgeFlight, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f, ok := fs.m[id]; ok {
		return f, false
	}
	if fs.m == nil {
		fs.m = map[ids.ID]*purgeFlight{}
	}
	f := &purgeFlight{done: make(chan struct{})}
	fs.m[id] = f
	return f, true
}

func (fs *purgeFlights) leave(id ids.ID, f *purgeFlight, err error) {
	fs.mu.Lock()
	delete(fs.m, id)
	fs.mu.Unlock()
	f.err = err
	close(f.done)
}

// finishVersion is steps 2 to 5 of one version's purge (removeBytes),
// run once at a time per version in this process: a caller that finds it
// under way waits for it (bounded by ctx) and, if it failed, runs it once
// more itself. Each step of a purge after its key is safe to repeat
// (docs/FORMAT.md, "Purge of an object"), so a finish that another process
// or an earlier call already did costs a repeated delete and proof, never
// a wrong answer.
func (a *Archive) finishVersion(ctx context.Context, v catalog.Version) error {
	for waited := false; ; waited = true {
		f, mine := a.flights.enter(v.ID)
		if mine {
			err := a.removeBytes(ctx, v)
			a.flights.leave(v.ID, f, err)
			return err
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return wrapf("purge: wait for the purge under way", ctx.Err())
		}
		if f.err == nil || waited {
			return f.err
		}
	}
}

// removeBytes is steps 2 to 5 of the purge of one version whose key is
// destroyed (docs/FORMAT.md, "Purge of an object"); a packed row's are
// those of "Purge of a packed row".
func (a *Archive) removeBytes(ctx context.Context, v catalog.Version) error {
	if v.Location == catalog.Packed {
		return a.purgePacked(ctx, v)
	}
	// 2. Storage's count of purges raised to the catalog's.
	if err := a.raisePurgeCount(ctx); err != nil {
		return err
	}
	crashpoint.Hit(crashpoint.PurgeAfterCount)
	// 3. The tombstone.
	if err := a.writeTombstone(ctx, v); err != nil {
		return err
	}
	crashpoint.Hit(crashpoint.PurgeAfterTombstone)
	// 4. The object deleted and proven gone.
	key := ObjectKey(v.Location, v.Tenant, v.ID)
	if err := a.Objects.Delete(ctx, key); err != nil {
		return wrapf("purge: delete object", err)
	}
	if _, err := a.Objects.Stat(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
		if err == nil {
			err = errors.New("the storage still holds an object it was told to delete")
		}
		return wrapf("purge: prove the object gone", err)
	}
	crashpoint.Hit(crashpoint.PurgeAfterDelete)
	// 5. Transaction: the version's row deleted, and the vCon's when
	// nothing of it is left and it is not held.
	return a.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.FinishPurge(v.ID) })
}

func (a *Archive) writeTombstone(ctx context.Context, v catalog.Version) error {
	err := objstore.Put(ctx, a.Objects, TombstoneKey(a.Loc, v.Tenant, v.ID), bytes.NewReader(nil), false)
	if err != nil {
		return wrapf("purge: write tombstone", err)
	}
	return nil
}

// purgePacked is the purge of a row in a Parquet pack file: the file is
// written again without it (docs/FORMAT.md, "Purge of a packed row"). It
// needs Parquet storage on, as serve refuses to start without it once a
// version is packed.
func (a *Archive) purgePacked(ctx context.Context, v catalog.Version) error {
	p := a.packer
	if p == nil {
		return errors.New("purge: packed versions need Parquet storage ([storage.parquet])")
	}
	return p.purgeRow(ctx, v)
}

// Sweep finishes purges left unfinished, then purges every version whose
// retention ran out. It returns the number of versions purged.
func (a *Archive) Sweep(ctx context.Context) (int, error) {
	var errs []error
	unfinished, err := a.Cat.Purging(ctx)
	if err != nil {
		return 0, err
	}
	if len(unfinished) > 0 {
		// The key deletion may still sit in the WAL if a checkpoint failed,
		// and in the replica if its rollover did.
		if err := a.checkpoint(ctx); err != nil {
			return 0, err
		}
		if err := a.forget(ctx); err != nil {
			return 0, err
		}
	}
	done := 0
	for _, v := range unfinished {
		if err := a.finishVersion(ctx, v); err != nil {
			errs = append(errs, err)
		} else {
			done++
		}
	}
	// One pass over the hidden versions, a page at a time: a version the
	// pass leaves (held, or changed meanwhile) waits for the next sweep.
	var after catalog.DueCursor
	for {
		due, next, err := a.Cat.PurgeDue(ctx, a.DefaultRetention, a.now(), after, 500)
		if err != nil {
			errs = append(errs, err)
			break
		}
		if len(due) == 0 {
			break
		}
		n, err := a.Purge(ctx, due)
		done += n
		if err != nil {
			errs = append(errs, err)
			break
		}
		after = next
	}
	// The sweep is the clock of lawful bases (docs/lawful-basis.md,
	// "Expiry").
	if err := a.EraseExpired(ctx); err != nil {
		errs = append(errs, err)
	}
	// An erasure whose purges a crash or a failure cut off is recorded
	// done, with its receipt, once they are (docs/erasure.md).
	if err := a.FinishErasures(ctx); err != nil {
		errs = append(errs, err)
	}
	// So is a tenant's delete (docs/FORMAT.md, "Tenant delete").
	if err := a.FinishTenantDeletes(ctx); err != nil {
		errs = append(errs, err)
	}
	return done, errors.Join(errs...)
}

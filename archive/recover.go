package archive

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/reserve"
	"github.com/vcon-server/vcon-server/objstore"
)

// Recovery has two halves (docs/check-and-recovery.md, "Crash safety and
// start-up recovery"). Recover runs before the server answers and does
// only what is pending: its work follows what the catalog says was left
// half done, not how much the store holds. Look runs after, in the
// background: the routine look at every object.

// Recovery counts what a start-up recovery repaired.
type Recovery struct {
	Tombstoned  int // keys destroyed again from storage tombstones
	PurgesEnded int // unfinished purges finished
	PackFiles   int // pending pack files deleted (Parquet storage)
	Adopted     int // pack files a restored catalog did not name, adopted
	Repointed   int // versions whose rows now name an adopted file
}

const msgBehind = "start-up recovery: storage counted more purges than the catalog, which was restored from an older copy; every tombstone is read"

// Recover repairs, before the server answers, what a crash or a restore
// left pending (docs/FORMAT.md, "The order of every write", "Restore"). It
// runs while this process holds the data directory's lock and before it
// accepts a request, so no store is in flight. It reads no folder of
// objects: what needs that, temporary files a kill left among them, is
// Look's.
func (a *Archive) Recover(ctx context.Context) (Recovery, error) {
	var rec Recovery
	restored, err := a.Cat.Restored(ctx)
	if err != nil {
		return rec, err
	}
	n, err := a.reapplyTombstones(ctx, restored)
	rec.Tombstoned = n
	if err != nil {
		return rec, err
	}
	if rec.Adopted, rec.Repointed, err = a.adoptRestored(ctx, restored); err != nil {
		return rec, err
	}
	if rec.PackFiles, err = a.recoverPacks(ctx); err != nil {
		return rec, err
	}
	n, err = a.Sweep(ctx)
	rec.PurgesEnded = n
	switch {
	case errors.Is(err, errForget):
		// The keys are destroyed here; the sweep finishes the purges once
		// the replica's target answers again.
		a.logError("start-up recovery: purges wait for the replica", err)
	case onlyFull(err):
		// Every key a purge destroyed stays destroyed, and every step
		// after it waits safely (docs/FORMAT.md, "Purge of an object"):
		// the server starts, refusing stores, so that deletes can free
		// the disk, and the sweep finishes these purges once they have.
		a.logWarn(msgRecoverFull, err)
	case err != nil:
		return rec, err
	}
	if restored {
		err := a.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.ClearRestored() })
		if onlyFull(err) {
			// Kept, the mark makes the next start read every tombstone
			// again: more work, nothing unsafe.
			a.logWarn(msgRecoverFull, err)
		} else if err != nil {
			return rec, err
		}
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
// backup taken before the purge (docs/FORMAT.md, "Restore"). It lists the
// tombstones only when storage's purge count is above the catalog's, or
// cannot be told (the catalog has none yet; storage's is missing while
// the catalog counted purges, or is not a count); otherwise every
// tombstone is of a purge this catalog made, and it reads one small
// object.
func (a *Archive) reapplyTombstones(ctx context.Context, restored bool) (int, error) {
	stored, readable, err := a.readPurgeCount(ctx)
	if err != nil {
		return 0, err
	}
	have, known, err := a.Cat.PurgeCount(ctx)
	if err != nil {
		return 0, err
	}
	a.rec.purges.set(stored)
	behind := known && readable && stored > have
	unknown := restored || !known || !readable || (stored < 0 && have > 0)
	if !behind && !unknown {
		return 0, nil
	}
	if behind && a.Log != nil {
		a.Log.Info(msgBehind, "purges_in_storage", stored, "purges_in_catalog", have)
	}
	tenants, err := a.Cat.Tenants(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, t := range tenants {
		n, err := a.reapplyTenant(ctx, t.ID)
		total += n
		if err != nil {
			return total, err
		}
	}
	if restored {
		a.reportRestored(ctx, total, stored, readable, have)
	}
	// Only now that every key a tombstone names is destroyed does the
	// catalog catch up: a start cut before this reads them all again.
	if err := a.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.RaisePurgeCount(max(stored, 0)) }); err != nil {
		return total, err
	}
	// And storage's count is written again where it was missing or not a
	// count, so the next start need not read the tombstones; on a full
	// disk the next purge writes it, before its tombstone.
	if err := a.raisePurgeCount(ctx); onlyFull(err) {
		a.logWarn(msgRecoverFull, err)
	} else if err != nil {
		return total, err
	}
	return total, nil
}

const msgRecoverFull = "start-up recovery: the data directory's disk is full; purges wait for room, which deletes free"

// onlyFull reports whether err is refusals for space only: each error it
// joins is one (reserve.IsFull).
func onlyFull(err error) bool {
	if err == nil {
		return false
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !onlyFull(e) {
				return false
			}
		}
		return true
	}
	return reserve.IsFull(err)
}

func (a *Archive) logWarn(msg string, err error) {
	if a.Log != nil {
		a.Log.Warn(msg, "error", err.Error())
	}
}

// Messages of a restored catalog's first start: what its tombstones
// destroyed again, and what nothing can (docs/disaster-recovery.md,
// "What a restore cannot bring back").
const (
	msgRestoredTombstones = "start-up recovery: a restored catalog: the keys of versions purged after the replica's newest change destroyed again from the tombstones storage kept"
	msgNoPurgeCount       = "start-up recovery: storage holds no purge count the restored catalog can trust, so its tombstones may have been lost with the disk: a vCon purged or erased after the replica's newest change may have its keys back; erase it again"
	msgRestoreLoss        = "start-up recovery: the restore accepted a loss: a purge or an erasure among the lost changes is destroyed again only where storage kept its tombstone, and an erasure's record and receipt among them are gone; erase such vCons again"
)

// reportRestored logs, at a restored catalog's first start, how many
// keys the tombstones destroyed again and how many purges storage counted
// that the catalog did not; and warns of what no tombstone can bring
// back: the purges and erasures of a storage whose count (and so its
// tombstones) was lost, and those among the changes a restore accepted
// to lose. Erasures whose tombstones were lost cannot be named: only the
// lost catalog knew them.
func (a *Archive) reportRestored(ctx context.Context, destroyed int, stored int64, readable bool, have int64) {
	if a.Log == nil {
		return
	}
	after := int64(0)
	if readable && stored > have {
		after = stored - have
	}
	a.Log.Info(msgRestoredTombstones, "keys_destroyed_again", destroyed, "purges_after_replica", after)
	if !readable || (stored < 0 && have > 0) {
		a.Log.Warn(msgNoPurgeCount, "purges_in_catalog", have)
	}
	if lost, err := a.Cat.Meta(ctx, catalog.MetaRestoreLoss); err == nil && len(lost) > 0 {
		a.Log.Warn(msgRestoreLoss, "lost", string(lost))
	}
}

// reapplyTenant destroys again the keys of the tenant's versions that
// have a tombstone and that the catalog keeps.
func (a *Archive) reapplyTenant(ctx context.Context, tenant ids.ID) (int, error) {
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
		n = 0 // a write refused for space runs again (catalog.Update)
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

// recoveryState is what recovery keeps in memory while the server runs:
// storage's purge count as last read or written, and the stores in flight.
type recoveryState struct {
	purges   storedPurges
	inFlight storesInFlight
}

// storesInFlight are the version ids of the stores this process has
// started and not finished: their objects may exist before their rows.
type storesInFlight struct {
	mu sync.Mutex
	m  map[ids.ID]struct{}
}

// storing records a store in flight until the returned func is called,
// after its commit or after its object was removed.
func (s *storesInFlight) storing(id ids.ID) func() {
	s.mu.Lock()
	if s.m == nil {
		s.m = map[ids.ID]struct{}{}
	}
	s.m[id] = struct{}{}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.m, id)
		s.mu.Unlock()
	}
}

func (s *storesInFlight) has(id ids.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[id]
	return ok
}

// LookStats count what one look at storage did.
type LookStats struct {
	Temps      int  // temporary files older than the start, removed
	Tenants    int  // tenants looked at
	Objects    int  // objects listed
	Orphans    int  // objects no catalog row names, removed
	PackCopies int  // objects of versions already packed, removed
	Done       bool // the pass reached its last tenant
}

// metaLookAfter is the meta key of the look's cursor: the id of the last
// tenant a pass finished, empty when no pass is under way.
const metaLookAfter = "look_after"

const msgLook = "storage look"

// Look is the routine look at every object of every tenant, after the
// server answers (docs/check-and-recovery.md): it removes objects no
// catalog row names (a store that never committed; the versions a
// restored catalog lost) and, with Parquet storage, the objects of
// versions already packed. Only an object whose version id was made
// before started (this process's start) can be an orphan, and only when
// no store of this process has it in flight; that no row names it (or
// that its row is packed) is checked again right before its delete.
//
// It goes through the tenants in id order and records each one it
// finished in the catalog's meta, so a pass cut by a stop goes on at the
// next start with the tenant it was cut in: a pass lists every object
// once, plus, per stop, what it had listed of that one tenant.
func (a *Archive) Look(ctx context.Context, started time.Time) (LookStats, error) {
	var st LookStats
	cutoff := started.Truncate(time.Millisecond)
	// A file still under its temporary name from before the start is a
	// killed write's: nothing in flight in this process is that old. A
	// read of every folder, so it waits for the look, not the start.
	if d, ok := a.Objects.(interface {
		RemoveStaleTemps(time.Duration) (int, error)
	}); ok {
		n, err := d.RemoveStaleTemps(time.Since(cutoff))
		st.Temps = n
		if err != nil {
			return st, err
		}
	}
	tenants, err := a.Cat.Tenants(ctx)
	if err != nil {
		return st, err
	}
	sort.Slice(tenants, func(i, j int) bool { return bytes.Compare(tenants[i].ID[:], tenants[j].ID[:]) < 0 })
	after, err := a.Cat.Meta(ctx, metaLookAfter)
	if err != nil && !errors.Is(err, catalog.ErrNotFound) {
		return st, err
	}
	for _, t := range tenants {
		if len(after) == len(t.ID) && bytes.Compare(t.ID[:], after) <= 0 {
			continue
		}
		if err := a.lookTenant(ctx, t.ID, cutoff, &st); err != nil {
			return st, err
		}
		st.Tenants++
		id := t.ID
		if err := a.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.SetMeta(metaLookAfter, id[:]) }); err != nil {
			return st, err
		}
	}
	st.Done = true
	return st, a.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.SetMeta(metaLookAfter, []byte{}) })
}

// lookTenant lists the tenant's objects, notes those whose row is missing
// or packed, then deletes each after checking that again.
func (a *Archive) lookTenant(ctx context.Context, tenant ids.ID, cutoff time.Time, st *LookStats) error {
	var suspects []string
	err := a.Objects.List(ctx, kindPrefix(a.Loc, kindObjects, tenant), func(info objstore.Info) error {
		st.Objects++
		id, ok := versionOf(info.Key)
		if !ok || !ids.Time(id).Before(cutoff) {
			return nil // not a name this server makes, or maybe a store in flight
		}
		if gone, _, err := a.lookGone(ctx, id); err != nil || !gone {
			return err
		}
		suspects = append(suspects, info.Key)
		return nil
	})
	if err != nil {
		return wrapf("look: list objects", err)
	}
	for _, key := range suspects {
		id, _ := versionOf(key)
		if a.rec.inFlight.has(id) {
			continue
		}
		gone, packed, err := a.lookGone(ctx, id)
		if err != nil {
			return err
		}
		if !gone {
			continue
		}
		if err := a.Objects.Delete(ctx, key); err != nil {
			return wrapf("look: delete an object", err)
		}
		if packed {
			st.PackCopies++
		} else {
			st.Orphans++
		}
	}
	return nil
}

// lookGone reports whether the object of version id may go: no row names
// it, or its row is packed (its bytes are in a pack file).
func (a *Archive) lookGone(ctx context.Context, id ids.ID) (gone, packed bool, err error) {
	v, err := a.Cat.Version(ctx, id)
	if errors.Is(err, catalog.ErrNotFound) {
		return true, false, nil
	}
	if err != nil {
		return false, false, err
	}
	return v.Location == catalog.Packed, v.Location == catalog.Packed, nil
}

// LogLook logs what a look removed, in counts only, at info when it
// removed anything.
func (a *Archive) LogLook(st LookStats) {
	if a.Log == nil {
		return
	}
	level := slog.LevelDebug
	if st.Temps+st.Orphans+st.PackCopies > 0 {
		level = slog.LevelInfo
	}
	a.Log.Log(context.Background(), level, msgLook, "temporary_files", st.Temps, "orphan_objects", st.Orphans, "packed_objects_removed", st.PackCopies,
		"objects", st.Objects, "tenants", st.Tenants, "done", st.Done)
}

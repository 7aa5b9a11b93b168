package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/vcon-server/vcon-server/objstore"
)

// Crash recovery of a rollover (docs/FORMAT.md, "Replica rollover"):
// what a cut-off one left is finished before any segment or rollover.

// settle finishes what a cut-off rollover left, before any segment or
// rollover: a generation the record names as pending is abandoned, and a
// rollover whose record was committed has its deletes finished. An
// abandoned generation is deleted rather than written whole again, so
// that a rollover that failed (a target that answered 503 for a while)
// costs what the next rollover must forget, not a copy of the catalog.
// It runs under lock.
func (r *Replica) settle(ctx context.Context, st *state) error {
	if st == nil || st.Gen == 0 || st.Target != r.cfg.Store.String() {
		// The first generation, and the first in a new target, are
		// written whole, with what a cut-off one left deleted.
		return nil
	}
	if st.Pending != 0 {
		if err := r.abandon(ctx, st); err != nil {
			return err
		}
	}
	if st.Stale {
		return r.deleteStale(ctx, st)
	}
	return nil
}

// abandon deletes the objects of every generation newer than the
// record's, which only a cut-off rollover writes: the manifests first, so
// that no restore takes such a generation up once the record's takes
// segments again, then the rest, each proven gone; then the record forgets
// the pending generation, keeping its number used.
func (r *Replica) abandon(ctx context.Context, st *state) error {
	all, _, err := r.listAll(ctx)
	if err != nil {
		return err
	}
	if err := r.ownTarget(ctx, all); err != nil {
		return err
	}
	// The head may name the cut-off manifest: it names the record's
	// newest object again first (or goes, for a record from before the
	// head), so that it never names an object deleted below.
	if st.Last != "" {
		if err := r.writeHead(ctx, st.Gen, st.Last, st.LastHash, st.Uploaded, false); err != nil {
			return err
		}
	} else if err := r.cfg.Store.Delete(ctx, headKey); err != nil && !errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("replica: delete the head from %s: %w", r.cfg.Store, err)
	}
	var manifests, rest []string
	for _, k := range all {
		switch g, kind, _, _, ok := parseKey(k); {
		case !ok || g <= st.Gen:
		case kind == "manifest":
			manifests = append(manifests, k)
		default:
			rest = append(rest, k)
		}
	}
	for _, keys := range [][]string{manifests, rest} {
		for _, k := range keys {
			if err := r.cfg.Store.Delete(ctx, k); err != nil {
				return fmt.Errorf("replica: delete a cut-off generation's object from %s: %w", r.cfg.Store, err)
			}
		}
		for _, k := range keys {
			if _, err := r.cfg.Store.Stat(ctx, k); !errors.Is(err, objstore.ErrNotFound) {
				if err == nil {
					err = errors.New("the target still holds an object it was told to delete")
				}
				return fmt.Errorf("replica: prove a cut-off generation's object gone from %s: %w", r.cfg.Store, err)
			}
		}
	}
	r.cfg.Log.Info("replica: abandoned a rollover that was cut off", "generation", st.Pending, "deleted", len(manifests)+len(rest))
	st.Used = max(st.Used, st.Pending)
	st.Pending = 0
	return r.saveState(ctx, st, 0)
}

// deleteStale finishes the deletes of a rollover that was cut off after
// its record was committed: every object of an older generation that the
// record's shards do not name. It runs under lock.
func (r *Replica) deleteStale(ctx context.Context, st *state) error {
	all, _, err := r.listAll(ctx)
	if err != nil {
		return err
	}
	if err := r.ownTarget(ctx, all); err != nil {
		return err
	}
	keep := keptShards(st.Tables)
	var older []string
	for _, k := range all {
		if g, _, _, _, ok := parseKey(k); (!ok || g < st.Gen) && !keep[k] && k != headKey {
			older = append(older, k)
		}
	}
	if err := r.deleteAllBut(ctx, older, st.Gen, keep); err != nil {
		return err
	}
	r.cfg.Log.Info("replica: finished the deletes of a rollover that was cut off", "deleted", len(older))
	st.Stale = false
	return r.saveState(ctx, st, 0)
}

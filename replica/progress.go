package replica

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
)

// The turn, the group commit of max_lag = 0 and the record's progress
// (docs/FORMAT.md, "Replica objects"). A segment is acknowledged once the
// head names it; the catalog's record of it follows without being waited
// for. A record that lags the head is what a crash between the head and
// the record leaves, which the next step repairs: it cuts from the
// record's point again, and a restore follows the longest segment from
// each point.

// Sync returns once every change committed before it was called is in the
// replica, and the record says so. Calls that arrive while a step runs
// wait for it to end and return if it covered them; one of the others
// then cuts a single segment for all of them, as the catalog's writer
// commits the writes that arrive together (group commit).
func (r *Replica) Sync(ctx context.Context) error {
	if err := r.sync(ctx, false); err != nil {
		return err
	}
	return r.saveProgress(ctx)
}

// gatherWait bounds how long an acknowledgement's step waits for the
// writes in flight (a variable for tests, which wait longer).
var gatherWait = 10 * time.Millisecond

// sync is Sync without the record; gather: the step of an
// acknowledgement, which first lets the writes in flight commit.
func (r *Replica) sync(ctx context.Context, gather bool) error {
	want, err := r.cfg.Cat.LastChange(ctx)
	if err != nil {
		return err
	}
	for !r.holds(want) {
		ended := r.stepEnded()
		select {
		case r.turn <- struct{}{}:
			return r.stepTurn(ctx, want, gather)
		case <-ended:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// holds reports whether the replica holds change want, as this process
// knows.
func (r *Replica) holds(want int64) bool {
	return r.gen.Load() > 0 && r.uploaded.Load() >= want
}

// stepTurn runs a step with the turn taken.
func (r *Replica) stepTurn(ctx context.Context, want int64, gather bool) error {
	unlock, err := r.lockFile(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if r.holds(want) {
		return nil // the step that ended as the turn was taken
	}
	if gather {
		if err := r.gatherWrites(ctx); err != nil {
			return err
		}
	}
	err = r.step(ctx, want)
	r.note(err)
	return err
}

// gatherWrites waits until every write in flight asks for its
// acknowledgement, gatherWait at most: their changes are committed by
// then, and one segment and one head acknowledge them all, where a cut
// taken sooner leaves the rest a cut more to wait for and the disk more
// flushes. The replica's flushes share the disk with the writes' own (a
// cut is three in a directory: the segment, its folder and the head's
// slot), so segments that hold more writes leave more of the disk to the
// writes: on the benchmark's disk (make replica-bench, max_lag = 0) a segment
// went from 3.7 writes to 8, and ingest from 0.54 to 0.68 of ingest
// without the replica.
func (r *Replica) gatherWrites(ctx context.Context) error {
	deadline := time.After(gatherWait)
	for r.asking.Load() < r.admitted.Load() {
		select {
		case <-r.arrived:
		case <-deadline:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// arrive wakes the step that gathers writes.
func (r *Replica) arrive() {
	select {
	case r.arrived <- struct{}{}:
	default:
	}
}

// stepEnded is closed when the step running now ends (the next one's,
// when none runs).
func (r *Replica) stepEnded() <-chan struct{} {
	r.endMu.Lock()
	defer r.endMu.Unlock()
	return r.stepEnd
}

// lock takes this process's turn and the data directory's lock file, or
// gives up when ctx ends: a write with max_lag 0 waits for a step held up
// by a slow target or a long rollover no longer than its own deadline.
func (r *Replica) lock(ctx context.Context) (func(), error) {
	select {
	case r.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return r.lockFile(ctx)
}

// lockFile takes the lock file once the turn is taken; its unlock, or a
// failure, gives the turn back.
func (r *Replica) lockFile(ctx context.Context) (func(), error) {
	f, err := os.OpenFile(filepath.Join(r.cfg.DataDir, LockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		<-r.turn
		return nil, fmt.Errorf("replica: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			<-r.turn
			return nil, fmt.Errorf("replica: lock %s: %w", LockName, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			<-r.turn
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return func() {
		f.Close()
		r.endMu.Lock()
		close(r.stepEnd)
		r.stepEnd = make(chan struct{})
		r.endMu.Unlock()
		<-r.turn
	}, nil
}

// saveState replaces the record (a rollover's), dropping the log up to
// trim; the progress of the generation it replaces is forgotten.
func (r *Replica) saveState(ctx context.Context, st *state, trim int64) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	r.unsaved.Store(nil)
	if err := r.cfg.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.SetReplicaState(b, trim) }); err != nil {
		return fmt.Errorf("replica: record progress: %w", err)
	}
	r.gen.Store(st.Gen)
	r.uploaded.Store(st.Uploaded)
	return nil
}

// saveProgress records the newest segment's progress, unless the record
// already reaches as far (another process may have cut from it since).
// It commits as a note, without an fsync of its own: a record that a
// power cut takes back only lags the head.
func (r *Replica) saveProgress(ctx context.Context) error {
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	p := r.unsaved.Load()
	if p == nil {
		return nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	err = r.cfg.Cat.Note(ctx, func(tx *catalog.Tx) error {
		old, err := tx.ReplicaProgress()
		if err != nil {
			return err
		}
		var cur progress
		if old != nil && json.Unmarshal(old, &cur) == nil && (cur.Gen > p.Gen || cur.Gen == p.Gen && cur.Uploaded >= p.Uploaded) {
			return nil
		}
		return tx.SetReplicaProgress(b)
	})
	if err != nil {
		return fmt.Errorf("replica: record progress: %w", err)
	}
	r.unsaved.CompareAndSwap(p, nil)
	return nil
}

// saveLater records the newest progress on a goroutine of its own, one at
// a time: an acknowledgement waits for the head, never for the record.
func (r *Replica) saveLater() {
	if !r.saving.CompareAndSwap(false, true) {
		return // the running save looks again when it ends
	}
	go func() {
		for {
			if err := r.saveProgress(context.Background()); err != nil {
				r.cfg.Log.Warn("replica: cannot record progress in the catalog; the next step cuts from the point it holds", "err", err)
			}
			r.saving.Store(false)
			if r.unsaved.Load() == nil || !r.saving.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}

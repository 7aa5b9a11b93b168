package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
)

// Run cuts segments until ctx ends: at once when Wake is called, else
// often enough to keep max_lag. Failures are logged once when they start,
// then once a minute with a count, then once when they end; the lag they
// cause is what Admit refuses writes on.
func (r *Replica) Run(ctx context.Context) {
	// A quarter of max_lag between segments keeps the promise with room
	// for a slow upload; with max_lag 0 the writes cut their own, and
	// the ticks only carry what reads and background work changed.
	tick := min(max(r.cfg.MaxLag/4, 20*time.Millisecond), time.Second)
	if r.cfg.MaxLag == 0 {
		tick = time.Second
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	var failing int
	var lastLog time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.wake:
		}
		r.measure(ctx)
		err := r.Sync(ctx)
		r.measure(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			failing++
			if failing == 1 || time.Since(lastLog) >= time.Minute {
				r.cfg.Log.Error("replica: cannot write to the target; writes wait, then fail, once the lag passes max_lag", "target", r.String(), "failures", failing, "err", err)
				lastLog = time.Now()
			}
		case failing > 0:
			r.cfg.Log.Info("replica: the target answers again", "target", r.String(), "failures", failing)
			failing = 0
		}
	}
}

// Drain cuts the last segment when the server stops and logs the change
// number the replica then holds: the number check shows, and that
// restore --at-least takes (docs/disaster-recovery.md).
func (r *Replica) Drain(ctx context.Context) error {
	for r.saving.Load() { // the last acknowledgement's save of the record
		time.Sleep(time.Millisecond)
	}
	if err := r.Sync(ctx); err != nil {
		return err
	}
	r.cfg.Log.Info("replica: every change is in the replica", "generation", r.gen.Load(), "replicated", r.uploaded.Load())
	return nil
}

// Wake asks Run to cut a segment now.
func (r *Replica) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// measure notes when each change was first seen, so that the lag is the
// age of the oldest change not yet replicated, however busy the catalog.
func (r *Replica) measure(ctx context.Context) {
	last, err := r.cfg.Cat.LastChange(ctx)
	if err != nil {
		return
	}
	up := r.uploaded.Load()
	r.seenMu.Lock()
	defer r.seenMu.Unlock()
	n := 0
	for n < len(r.seen) && r.seen[n].seq <= up {
		n++
	}
	r.seen = r.seen[n:]
	if last > up && (len(r.seen) == 0 || last > r.seen[len(r.seen)-1].seq) {
		r.seen = append(r.seen, sighting{seq: last, at: time.Now()})
	}
	if len(r.seen) == 0 {
		r.behindSince.Store(0)
	} else {
		r.behindSince.Store(r.seen[0].at.UnixNano())
	}
}

// Replicated is the log point the replica holds, and whether it holds a
// generation yet (what this process knows: it learns both at its first
// step).
func (r *Replica) Replicated() (int64, bool) {
	return r.uploaded.Load(), r.gen.Load() > 0
}

// Lag is how long the oldest change not yet in the replica has waited (0
// when none waits).
func (r *Replica) Lag() time.Duration {
	s := r.behindSince.Load()
	if s == 0 {
		return 0
	}
	return time.Since(time.Unix(0, s))
}

// admitWait bounds how long a write waits for a lagging replica.
const admitWait = 5 * time.Second

// Admit is asked before a write: it returns nil while the replica keeps
// max_lag, waits a little while it does not, then refuses with an error
// wrapping ErrBehind that says why. With max_lag 0 every write waits in
// Acknowledge instead, so Admit lets it through and counts it in flight
// until Done: a segment waits for the writes in flight (gatherWrites).
// Every write Admit lets in ends with Done.
func (r *Replica) Admit(ctx context.Context) error {
	if r.cfg.MaxLag == 0 {
		r.admitted.Add(1)
		return nil
	}
	deadline := time.Now().Add(admitWait)
	for {
		// Run measures only around its steps: one held up by a slow
		// target, or waiting for a purge's rollover to release the lock,
		// must not hide the changes that wait meanwhile.
		r.measure(ctx)
		lag := r.Lag()
		if lag <= r.cfg.MaxLag {
			return nil
		}
		if time.Now().After(deadline) {
			return r.behind(lag)
		}
		r.Wake()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Acknowledge is asked after a write committed and before it is answered:
// with max_lag 0 it returns once the write is in the replica, or an error
// wrapping ErrBehind; otherwise at once.
func (r *Replica) Acknowledge(ctx context.Context) error {
	if r.cfg.MaxLag > 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, admitWait)
	defer cancel()
	r.asking.Add(1)
	defer r.asking.Add(-1)
	r.arrive()
	if err := r.sync(ctx, true); err != nil {
		return fmt.Errorf("%w: %s did not take the change: %v", ErrBehind, r.String(), err)
	}
	r.saveLater()
	return nil
}

// Done ends a write that Admit let in, acknowledged or not.
func (r *Replica) Done() {
	if r.cfg.MaxLag == 0 {
		r.admitted.Add(-1)
		r.arrive()
	}
}

func (r *Replica) behind(lag time.Duration) error {
	why := "it has not answered"
	if p := r.lastErr.Load(); p != nil {
		why = (*p).Error()
	}
	return fmt.Errorf("%w by %s, more than max_lag = %d: %s", ErrBehind, lag.Round(time.Millisecond), int(r.cfg.MaxLag/time.Second), why)
}

// Status is what /metrics and check show of the replica.
type Status struct {
	Target     string        `json:"target"`
	Generation int64         `json:"generation"`
	Replicated int64         `json:"replicated"` // the last change of the catalog's log the replica holds
	Lag        time.Duration `json:"-"`
	Bytes      int64         `json:"-"` // uploaded by this process
	Objects    int64         `json:"-"` // PUTs by this process, the head's included
	Error      string        `json:"error,omitempty"`
}

// Status reports the replica's state as this process last saw it.
func (r *Replica) Status() Status {
	s := Status{Target: r.String(), Generation: r.gen.Load(), Replicated: r.uploaded.Load(), Lag: r.Lag(), Bytes: r.bytes.Load(), Objects: r.objects.Load()}
	if p := r.lastErr.Load(); p != nil {
		s.Error = (*p).Error()
	}
	return s
}

// ErrForeign is wrapped by the refusal to write over another catalog's
// replica.
var ErrForeign = errors.New("the replica's target belongs to another catalog")

// IsBehind reports whether err is a replica's refusal.
func IsBehind(err error) bool { return errors.Is(err, ErrBehind) }

// Pending reports whether the catalog holds changes its replica does not,
// reading only the catalog: a command that changed nothing needs neither
// the master key nor the target.
func Pending(ctx context.Context, cat *catalog.Catalog) (bool, error) {
	last, err := cat.LastChange(ctx)
	if err != nil || last == 0 {
		return false, err
	}
	r := &Replica{cfg: Config{Cat: cat}}
	st, err := r.loadState(ctx)
	if err != nil {
		return false, err
	}
	return st == nil || last > st.Uploaded, nil
}

package replica

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestAdmitSeesLagWhileNothingSteps: a change waits while no step runs
// (Run held up in a slow upload, or behind a purge's rollover that holds
// the lock): once it has waited longer than max_lag, Admit refuses, rather
// than read the lag Run measured before it was held up.
func TestAdmitSeesLagWhileNothingSteps(t *testing.T) {
	f := newFixture(t)
	f.rep.cfg.MaxLag = time.Second
	f.add(1)
	if err := f.rep.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.rep.measure(f.ctx) // caught up, as Run saw it last
	unlock, err := f.rep.lock(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if err := f.rep.Admit(f.ctx); err != nil {
		t.Fatalf("Admit with the replica caught up: %v", err)
	}
	f.add(1)
	// The next write's Admit sees the change waiting; a second, past
	// max_lag, is refused.
	if err := f.rep.Admit(f.ctx); err != nil {
		t.Fatalf("Admit with a change just seen: %v", err)
	}
	time.Sleep(1100 * time.Millisecond)
	start := time.Now()
	err = f.rep.Admit(f.ctx)
	if !errors.Is(err, ErrBehind) {
		t.Fatalf("Admit with a change waiting and no step for %s: %v, want ErrBehind", time.Since(start).Round(time.Millisecond), err)
	}
}

// TestSyncWaitEndsWithItsContext: a write with max_lag 0 whose step waits
// behind another one (a long rollover, an upload held up by the target)
// gives up when its context ends, as Acknowledge's deadline promises,
// rather than wait for the other step however long it takes.
func TestSyncWaitEndsWithItsContext(t *testing.T) {
	f := newFixture(t)
	f.add(1)
	if err := f.rep.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	unlock, err := f.rep.lock(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	f.add(1)
	ctx, cancel := context.WithTimeout(f.ctx, 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f.rep.Sync(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Sync behind a held step: %v, want its deadline", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Sync behind a held step outlived its deadline by seconds")
	}
}

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

// TestSegmentWaitsForTheWritesInFlight: with max_lag 0, the step of a
// write's acknowledgement waits until every write let in asks for its
// own (or ends without one), so that one segment acknowledges them all.
func TestSegmentWaitsForTheWritesInFlight(t *testing.T) {
	defer func(d time.Duration) { gatherWait = d }(gatherWait)
	gatherWait = time.Minute // the writes, not the bound, end the wait
	f := newFixture(t)
	f.add(1)
	if err := f.rep.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	segments := func() int {
		n := 0
		for k := range f.keys() {
			if _, kind, _, _, _ := parseKey(k); kind == "seg" {
				n++
			}
		}
		return n
	}
	acknowledge := func() chan error {
		done := make(chan error, 1)
		go func() { done <- f.rep.Acknowledge(f.ctx) }()
		return done
	}
	waits := func(done chan error, what string) {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("%s was acknowledged (%v) while a write in flight had not asked", what, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	for _, asks := range []bool{true, false} {
		before := segments()
		for range 3 {
			if err := f.rep.Admit(f.ctx); err != nil {
				t.Fatal(err)
			}
		}
		f.add(1)
		first := acknowledge()
		waits(first, "the first write")
		f.add(1)
		second := acknowledge()
		waits(second, "the second write")
		if asks {
			f.add(1)
			if err := <-acknowledge(); err != nil {
				t.Fatal(err)
			}
		}
		f.rep.Done() // the third write ends, asking or not
		for _, done := range []chan error{first, second} {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		f.rep.Done()
		f.rep.Done()
		if n := segments() - before; n != 1 {
			t.Fatalf("the three writes (the third asking: %v) took %d segments, want 1", asks, n)
		}
	}
	if err := f.rep.Drain(f.ctx); err != nil { // the acknowledgements' saves of the record
		t.Fatal(err)
	}
}

package replica

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/objstore"
)

// heldHead holds every write of the head at its commit until released,
// or fails it.
type heldHead struct {
	objstore.Store
	entered chan struct{} // a head write waits
	release chan error    // its outcome: nil commits it
	hold    func() bool   // whether to hold the next one
}

func (s *heldHead) Upload(ctx context.Context, key string, createOnly bool) (objstore.Upload, error) {
	u, err := s.Store.Upload(ctx, key, createOnly)
	if err != nil || key != headKey || !s.hold() {
		return u, err
	}
	return &heldUpload{Upload: u, s: s}, nil
}

type heldUpload struct {
	objstore.Upload
	s *heldHead
}

func (u *heldUpload) Commit() error {
	u.s.entered <- struct{}{}
	if err := <-u.s.release; err != nil {
		u.Abort()
		return err
	}
	return u.Upload.Commit()
}

func newHeldHead(t *testing.T) (*fixture, *heldHead) {
	f := newFixture(t)
	h := &heldHead{Store: f.store, entered: make(chan struct{}), release: make(chan error), hold: func() bool { return false }}
	f.rep = New(Config{Store: h, Cat: f.cat, Key: f.key, DataDir: f.dir})
	f.add(1)
	if err := f.rep.Sync(f.ctx); err != nil { // the first generation
		t.Fatal(err)
	}
	h.hold = func() bool { return true }
	return f, h
}

// syncing runs Sync and sends its outcome.
func (f *fixture) syncing() chan error {
	done := make(chan error, 1)
	go func() { done <- f.rep.Sync(f.ctx) }()
	return done
}

func (f *fixture) segments() int {
	n := 0
	for k := range f.keys() {
		if strings.Contains(k, "/seg-") {
			n++
		}
	}
	return n
}

func notYet(t *testing.T, done chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s returned (%v) before the head named its segment", what, err)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestNextSegmentCutWhileHeadIsWritten(t *testing.T) {
	f, h := newHeldHead(t)
	f.add(1)
	first := f.syncing()
	<-h.entered // the head of the first segment is being written
	f.add(1)
	second := f.syncing()
	for f.segments() < 2 { // cut while the first head is held
		time.Sleep(time.Millisecond)
	}
	notYet(t, first, "the first Sync")
	notYet(t, second, "the second Sync")
	h.release <- nil
	<-h.entered // one head for the second segment
	notYet(t, second, "the second Sync")
	h.release <- nil
	for _, done := range []chan error{first, second} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	hd, err := readHead(f.ctx, &f.rep.s, f.store)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := f.cat.LastChange(f.ctx); hd.Seq != want || f.rep.Status().Replicated != want {
		t.Fatalf("the head reaches change %d and the replica says %d, want %d", hd.Seq, f.rep.Status().Replicated, want)
	}
	f.restoreMatches()
}

func TestFailedHeadIsWrittenAgain(t *testing.T) {
	f, h := newHeldHead(t)
	f.add(1)
	done := f.syncing()
	<-h.entered
	h.release <- errors.New("the target said 503")
	if err := <-done; err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("Sync with the head refused: %v", err)
	}
	segs := f.segments()
	done = f.syncing()
	<-h.entered // the same segment's head, again
	h.release <- nil
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := f.segments(); n != segs {
		t.Fatalf("%d segments after the head was written again, want %d: the segment is not cut twice", n, segs)
	}
	f.restoreMatches()
}

func TestRolloverWaitsForTheHeadsInFlight(t *testing.T) {
	f, h := newHeldHead(t)
	f.add(1)
	synced := f.syncing()
	<-h.entered
	forgot := make(chan error, 1)
	go func() { forgot <- f.rep.Forget(f.ctx) }()
	notYet(t, forgot, "Forget")
	h.release <- nil
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	<-h.entered // the rollover's head, after the segment's
	h.release <- nil
	if err := <-forgot; err != nil {
		t.Fatal(err)
	}
	hd, err := readHead(f.ctx, &f.rep.s, f.store)
	if err != nil {
		t.Fatal(err)
	}
	if hd.Key != manifestKey(hd.Gen) || hd.Gen != f.rep.Status().Generation {
		t.Fatalf("the head names %s of generation %d after the rollover to generation %d", hd.Key, hd.Gen, f.rep.Status().Generation)
	}
	f.restoreMatches()
}

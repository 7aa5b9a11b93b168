package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/vcon-server/vcon-server/internal/crashpoint"
)

// The head's pipeline (docs/FORMAT.md, "Segments"): a step ends once its
// segment is written, and the head that names it is written behind it, so
// that the next segment is cut while the head is written. One writer
// writes the head at a time, each time naming the newest segment cut when
// it starts: under load, one head names several segments. A write is
// acknowledged once a head names its segment or a later one; until then
// the process cuts on from its own segments (Replica.cut).

// headRound is one write of the head: the writes its segment covers wait
// for done, then read err.
type headRound struct {
	p    *progress
	done chan struct{}
	err  error
}

// heads is the writer's state.
type heads struct {
	mu      sync.Mutex
	running *headRound    // being written
	next    *headRound    // the newest segment cut since running started
	idle    chan struct{} // closed when the writer has nothing left
}

// queueHead has the head name p, a segment this process cut, after the
// write in flight. It is called in turn, with the lock file held; the
// writer holds the lock file too until it is idle, so that no other
// process cuts from the catalog's record meanwhile.
func (r *Replica) queueHead(p *progress) {
	h := &r.heads
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case r.uploaded.Load() >= p.Uploaded:
	case h.next != nil:
		h.next.p = p
	case h.running != nil && h.running.p.Uploaded >= p.Uploaded:
	default:
		h.next = &headRound{p: p, done: make(chan struct{})}
		if h.running == nil {
			r.flock.hold()
			h.idle = make(chan struct{})
			go r.writeHeads(h.idle)
		}
	}
}

// writeHeads writes the head for each round queued, in order, until none
// is left.
func (r *Replica) writeHeads(idle chan struct{}) {
	h := &r.heads
	for {
		h.mu.Lock()
		round := h.next
		h.running, h.next = round, nil
		h.mu.Unlock()
		if round == nil {
			r.flock.release()
			close(idle)
			return
		}
		p := round.p
		// Not the context of a write that waits: the segment is cut for
		// every write it holds.
		round.err = r.writeHead(context.Background(), p.Gen, p.Last, p.LastHash, p.Uploaded)
		if round.err == nil {
			crashpoint.Hit(crashpoint.ReplicaAfterHead)
			r.unsaved.Store(p)
			r.uploaded.Store(p.Uploaded)
		}
		r.note(round.err)
		close(round.done)
	}
}

// headCovering is the head write queued or in flight that will name
// change want; nil when none will.
func (r *Replica) headCovering(want int64) *headRound {
	h := &r.heads
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, round := range []*headRound{h.running, h.next} {
		if round != nil && round.p.Uploaded >= want {
			return round
		}
	}
	return nil
}

// drainHeads returns once no head write is queued or in flight. It is
// called in turn, before anything but a segment: a rollover's head must
// not be written over by an older segment's.
func (r *Replica) drainHeads(ctx context.Context) error {
	h := &r.heads
	h.mu.Lock()
	idle := h.idle
	busy := h.running != nil || h.next != nil
	h.mu.Unlock()
	if !busy {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fileLock is the lock file, held by this process while a step or a head
// write needs it (flock locks an open file, so it stays open meanwhile).
type fileLock struct {
	mu   sync.Mutex
	f    *os.File
	refs int
}

// take locks the lock file, or counts one more holder if this process
// holds it already; it waits while another process holds it, until ctx
// ends.
func (l *fileLock) take(ctx context.Context, path string) error {
	l.mu.Lock()
	if l.refs > 0 {
		l.refs++
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	// Only the turn's holder takes the lock from none, so no other
	// goroutine opens it meanwhile.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return fmt.Errorf("replica: lock %s: %w", filepath.Base(path), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	l.mu.Lock()
	l.f, l.refs = f, 1
	l.mu.Unlock()
	return nil
}

// hold counts one more holder of a lock this process holds.
func (l *fileLock) hold() {
	l.mu.Lock()
	l.refs++
	l.mu.Unlock()
}

// release drops a holder; the last one unlocks the file.
func (l *fileLock) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refs--; l.refs == 0 {
		l.f.Close()
		l.f = nil
	}
}

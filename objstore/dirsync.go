package objstore

import (
	"sync"

	"github.com/vcon-server/vcon-server/internal/durable"
)

// dirSyncs shares folder syncs between concurrent commits and deletes, as
// a group commit shares a log's: a name changed in a folder is durable
// once a sync of that folder that started after the change has ended. A
// caller joins the next sync to start, never one already running (it may
// have started before the caller's rename); while one runs, every caller
// that arrives waits for the same next one, which then covers them all.
type dirSyncs struct {
	mu      sync.Mutex
	folders map[string]*folderSync
	syncDir func(string) error // durable.SyncDir; tests replace it
}

// folderSync is one folder's state: whether a sync runs, and the round
// the callers that arrived since it started wait for.
type folderSync struct {
	running bool
	next    *syncRound
}

type syncRound struct {
	done chan struct{}
	err  error
}

// sync returns once a sync of dir that started after the call has ended,
// with that sync's error.
func (s *dirSyncs) sync(dir string) error {
	s.mu.Lock()
	if s.folders == nil {
		s.folders = map[string]*folderSync{}
	}
	f := s.folders[dir]
	if f == nil {
		f = &folderSync{}
		s.folders[dir] = f
	}
	r := f.next
	if r == nil {
		r = &syncRound{done: make(chan struct{})}
		f.next = r
	}
	lead := !f.running
	if lead {
		f.running, f.next = true, nil
	}
	s.mu.Unlock()
	if lead {
		s.run(dir, f, r)
	}
	<-r.done
	return r.err
}

// run syncs dir for round r, then starts the round that gathered
// meanwhile, if any, on its own goroutine: the caller that ran r returns
// as soon as its own round is done.
func (s *dirSyncs) run(dir string, f *folderSync, r *syncRound) {
	fn := s.syncDir
	if fn == nil {
		fn = durable.SyncDir
	}
	r.err = fn(dir)
	close(r.done)
	s.mu.Lock()
	next := f.next
	if next == nil {
		f.running = false
		delete(s.folders, dir) // an idle folder costs nothing
	} else {
		f.next = nil
	}
	s.mu.Unlock()
	if next != nil {
		go s.run(dir, f, next)
	}
}

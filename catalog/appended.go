package catalog

import (
	"context"
	"sync"
)

// An answer names the index of its request's record in its log
// (Vcon-Audit-Index, docs/api.md). The records of most changes are
// appended deep inside the catalog's methods (a tenant's setting, a hold,
// a tenant delete), so the request's context carries an Appended, and
// the writer fills it once the batch holding the request's writes has
// committed: the index comes from the append itself, never from another
// read of the log, and a write that rolled back names nothing.

// Appended holds, for one request, the index of the last record each log
// was given by the request's committed writes.
type Appended struct {
	mu   sync.Mutex
	logs []appendedLog // a request touches a log or two
}

type appendedLog struct {
	log   string
	index uint64
}

type appendedKey struct{}

// WithAppended returns ctx carrying a new Appended, which every write
// made with the returned context (or one derived from it) fills.
func WithAppended(ctx context.Context) (context.Context, *Appended) {
	a := &Appended{}
	return context.WithValue(ctx, appendedKey{}, a), a
}

func appendedOf(ctx context.Context) *Appended {
	a, _ := ctx.Value(appendedKey{}).(*Appended)
	return a
}

// Index is the index in log of the last record the request's committed
// writes appended to it; false when they appended none.
func (a *Appended) Index(log []byte) (uint64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, l := range a.logs {
		if l.log == string(log) {
			return l.index, true
		}
	}
	return 0, false
}

// note keeps the last index of each log a committed call appended to.
func (a *Appended) note(heads []callHead) {
	a.mu.Lock()
	defer a.mu.Unlock()
next:
	for _, h := range heads {
		for i := range a.logs {
			if a.logs[i].log == h.log {
				a.logs[i].index = h.h.size - 1
				continue next
			}
		}
		a.logs = append(a.logs, appendedLog{h.log, h.h.size - 1})
	}
}

// appendedCall is a call of a batch whose request waits for its indexes.
type appendedCall struct {
	to    *Appended
	heads []callHead
}

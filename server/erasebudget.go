package server

import (
	"math"
	"sync"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
)

// An erasure's batches share the catalog's writer fairly (catalog,
// erasebatch.go), but its work is still the server's: each tenant's
// erasures may name ErasePerMinute uuids a minute (docs/erasure.md). The
// budget refills continuously and holds a minute's worth at most; an
// erasure it cannot pay for is refused with 429 and a Retry-After that
// says when it could, before anything changed. A party erasure pays one
// uuid to start and the rest of the vCons it matched once done, so a
// tenant's next erasures wait for them.

// defaultErasePerMinute: three erasures of 10,000 uuids a minute.
const defaultErasePerMinute = 30000

type eraseBudget struct {
	perMinute float64
	now       func() time.Time

	mu      sync.Mutex
	tenants map[ids.ID]*budgetState // a tenant's: the catalog bounds how many there are
}

type budgetState struct {
	left float64 // may fall below zero after a party erasure
	at   time.Time
}

func newEraseBudget(l Limits) *eraseBudget {
	b := &eraseBudget{perMinute: float64(l.ErasePerMinute), now: l.Now, tenants: map[ids.ID]*budgetState{}}
	if b.perMinute <= 0 {
		b.perMinute = defaultErasePerMinute
	}
	if b.now == nil {
		b.now = time.Now
	}
	return b
}

// state is tenant's budget, refilled to now; b.mu held.
func (b *eraseBudget) state(tenant ids.ID) *budgetState {
	now := b.now()
	st := b.tenants[tenant]
	if st == nil {
		st = &budgetState{left: b.perMinute, at: now}
		b.tenants[tenant] = st
	}
	st.left = min(b.perMinute, st.left+now.Sub(st.at).Minutes()*b.perMinute)
	st.at = now
	return st
}

// take pays n uuids from tenant's budget, or returns how long until it
// holds them (nothing paid then).
func (b *eraseBudget) take(tenant ids.ID, n int) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.state(tenant)
	need := min(float64(n), b.perMinute)
	if st.left >= need {
		st.left -= need
		return 0
	}
	wait := (need - st.left) / b.perMinute * float64(time.Minute)
	return time.Duration(math.Ceil(wait))
}

// charge pays n more uuids after the fact, or gives back -n (an erasure
// refused before anything changed).
func (b *eraseBudget) charge(tenant ids.ID, n int) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.state(tenant)
	st.left = min(b.perMinute, st.left-float64(n))
}

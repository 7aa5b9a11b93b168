// Package load is the load generator of scripts/loadgen: many workers mix
// stores, replaces, reads, deletes and purges over many tenants of a
// running server for a fixed time, keeping a model of what each
// acknowledged answer promised, then read every vCon back and check it
// against the model. It only ever talks to a server on loopback.
//
// This file holds the run and its workers; model.go what the answers
// promised; requests.go the requests and their checks; report.go the
// figures; client.go the HTTPS client; bodies.go the vCons sent.
package load

import (
	"context"
	"errors"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Tenant is one tenant the load runs on, with a key that has the write,
// read and delete scopes.
type Tenant struct {
	ID    string `json:"tenant"`
	Token string `json:"token"`
	// Purge: the tenant's retention is 0d, so each DELETE purges at once.
	Purge bool `json:"purge"`
}

// Config shapes a run.
type Config struct {
	URL     string // https://127.0.0.1:PORT; loopback only
	CAPEM   []byte // the server's certificate or its CA
	Tenants []Tenant
	// Workers run at once (16 when zero); each owns the uuids it makes, so
	// no two requests race on one vCon and the model stays exact.
	Workers int
	// Duration of the mixed phase (10s when zero, at most a day);
	// MaxRequests bounds it too (1,000,000 when zero).
	Duration    time.Duration
	MaxRequests int64
	// MaxBody is the largest vCon in bytes (64 KiB when zero).
	MaxBody int
	// Seed makes the choice of operations repeatable (random when zero).
	Seed uint64
	// Faulty: the storage under the server is broken on purpose. A 5xx
	// answer or a cut connection is then counted as failed, not as an
	// error, and the model accepts either outcome of that request until a
	// later answer settles it. A wrong byte is an error in every mode.
	Faulty bool
	// Client replaces the HTTPS client (tests).
	Client *http.Client
	// MinEach keeps the mixed phase going past Duration (up to five times
	// it) until each operation (store, replace, read, delete, purge) ran
	// at least this often: a short test on a slow machine still covers
	// the whole mix.
	MinEach int
	// BeforeVerify, when set, runs between the mixed phase and the
	// verification (a test stops its faults and restarts the server
	// there); a URL it returns replaces URL for the verification.
	BeforeVerify func() string
}

type run struct {
	cfg      Config
	client   *http.Client
	requests atomic.Int64
	mu       sync.Mutex
	samples  []sample
	errs     []string
	nerr     int
	counts   map[string]int
}

// going reports whether the mixed phase goes on.
func (r *run) going(ctx context.Context, deadline, hard time.Time) bool {
	if ctx.Err() != nil || r.requests.Load() >= r.cfg.MaxRequests {
		return false
	}
	now := time.Now()
	if now.Before(deadline) {
		return true
	}
	if r.cfg.MinEach <= 0 || !now.Before(hard) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, op := range []string{"store", "replace", "read", "delete", "purge"} {
		if op == "purge" && !r.anyPurge() || op == "delete" && !r.anyKeep() {
			continue
		}
		if r.counts[op] < r.cfg.MinEach {
			return true
		}
	}
	return false
}

func (r *run) anyPurge() bool {
	for _, t := range r.cfg.Tenants {
		if t.Purge {
			return true
		}
	}
	return false
}

func (r *run) anyKeep() bool {
	for _, t := range r.cfg.Tenants {
		if !t.Purge {
			return true
		}
	}
	return false
}

// Run runs the load and the verification and returns the report. The
// error is for a run that could not start; a run with errors returns a
// report whose Errors or Lost is not 0.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if err := checkLoopback(cfg.URL); err != nil {
		return Report{}, err
	}
	if len(cfg.Tenants) == 0 {
		return Report{}, errors.New("load: no tenants")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 16
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 10 * time.Second
	}
	if cfg.Duration > 24*time.Hour {
		return Report{}, errors.New("load: a run lasts at most a day")
	}
	if cfg.MaxRequests <= 0 {
		cfg.MaxRequests = 1_000_000
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 64 << 10
	}
	if cfg.Seed == 0 {
		cfg.Seed = mrand.Uint64()
	}
	r := &run{cfg: cfg, client: cfg.Client, counts: map[string]int{}}
	if r.client == nil {
		c, err := NewClient(cfg.CAPEM, cfg.Workers)
		if err != nil {
			return Report{}, err
		}
		r.client = c
	}

	start := time.Now()
	// The phase ends between requests, never during one: a request cut
	// off by the client may still have taken effect, and the model could
	// not tell.
	deadline := start.Add(cfg.Duration)
	models := make([][]*entry, cfg.Workers)
	var wg sync.WaitGroup
	for w := 0; w < cfg.Workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rnd := mrand.New(mrand.NewPCG(cfg.Seed, uint64(w)))
			models[w] = r.worker(ctx, deadline, start.Add(5*cfg.Duration), rnd)
		}(w)
	}
	wg.Wait()
	mixed := time.Since(start)
	if cfg.BeforeVerify != nil {
		if u := cfg.BeforeVerify(); u != "" {
			if err := checkLoopback(u); err != nil {
				return Report{}, err
			}
			r.cfg.URL = u
		}
	}

	// Verification: every uuid, read back after the load, against the
	// model; the same workers, so it runs as fast as the load did.
	rep := Report{Tenants: len(cfg.Tenants), Workers: cfg.Workers, Seed: cfg.Seed}
	var verified, lost, acked atomic.Int64
	for w := range models {
		for _, e := range models[w] {
			acked.Add(int64(len(e.acked)))
		}
	}
	for w := 0; w < cfg.Workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for _, e := range models[w] {
				if ctx.Err() != nil {
					return
				}
				if !r.verify(ctx, e) {
					lost.Add(1)
				}
				verified.Add(1)
			}
		}(w)
	}
	wg.Wait()

	rep.Duration = mixed.Seconds()
	rep.Requests = r.requests.Load()
	rep.Throughput = float64(rep.Requests) / time.Since(start).Seconds()
	rep.VersionsAcked = int(acked.Load())
	rep.Verified = int(verified.Load())
	rep.Lost = int(lost.Load())
	rep.Ops = map[string]OpStats{}
	byOp := map[string][]time.Duration{}
	for _, s := range r.samples {
		st := rep.Ops[s.op]
		st.Count++
		if s.err {
			st.Errors++
			rep.Errors++
		}
		if s.failed {
			st.Failed++
			rep.Failed++
		}
		rep.Ops[s.op] = st
		byOp[s.op] = append(byOp[s.op], s.d)
	}
	for op, ds := range byOp {
		slices.Sort(ds)
		st := rep.Ops[op]
		st.P50 = ms(ds[len(ds)*50/100])
		st.P99 = ms(ds[min(len(ds)-1, len(ds)*99/100)])
		rep.Ops[op] = st
	}
	rep.FirstErrors = r.errs
	return rep, ctx.Err()
}

// worker runs operations until the deadline or the request bound,
// and returns its model.
func (r *run) worker(ctx context.Context, deadline, hard time.Time, rnd *mrand.Rand) []*entry {
	var model []*entry
	byTenant := make([][]*entry, len(r.cfg.Tenants))
	for r.going(ctx, deadline, hard) {
		ti := rnd.IntN(len(r.cfg.Tenants))
		p := rnd.IntN(100)
		if p < 30 || len(model) == 0 {
			// Before its first answer a uuid does not exist: a POST that
			// fails leaves it either absent or stored.
			e := &entry{uuid: newUUID(), tenant: ti, states: []state{{deleted: true}}}
			if r.store(ctx, rnd, e, "store") {
				model = append(model, e)
				byTenant[ti] = append(byTenant[ti], e)
			}
			continue
		}
		// One of this worker's uuids, of the tenant drawn when it has one:
		// with many tenants, a worker must not spend its first minutes
		// storing one vCon into each before anything else happens.
		e := model[rnd.IntN(len(model))]
		if mine := byTenant[ti]; len(mine) > 0 {
			e = mine[rnd.IntN(len(mine))]
		}
		switch {
		case p < 50:
			r.store(ctx, rnd, e, "replace")
		case p < 92:
			r.read(ctx, e)
		case e.live():
			r.delete(ctx, e)
		}
	}
	return model
}

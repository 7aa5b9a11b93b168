// Package load is the load generator of scripts/loadgen: many workers mix
// stores, replaces, reads, deletes and purges over many tenants of a
// running server for a fixed time, keeping a model of what each
// acknowledged answer promised, then read every vCon back and check it
// against the model. It only ever talks to a server on loopback.
package load

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
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

// OpStats are one operation's figures.
type OpStats struct {
	Count  int     `json:"count"`
	Errors int     `json:"errors"`
	Failed int     `json:"failed"`
	P50    float64 `json:"p50_ms"`
	P99    float64 `json:"p99_ms"`
}

// Report is the run's result, printed as one JSON line.
type Report struct {
	Duration      float64            `json:"duration_s"`
	Tenants       int                `json:"tenants"`
	Workers       int                `json:"workers"`
	Requests      int64              `json:"requests"`
	Throughput    float64            `json:"throughput_rps"`
	Errors        int                `json:"errors"`
	Failed        int                `json:"failed"`
	VersionsAcked int                `json:"versions_acked"`
	Verified      int                `json:"verified"`
	Lost          int                `json:"lost"`
	Ops           map[string]OpStats `json:"ops"`
	FirstErrors   []string           `json:"first_errors,omitempty"`
	Seed          uint64             `json:"seed"`
}

// state is one thing a vCon may be after the answers seen so far.
type state struct {
	deleted bool
	version string // the version id the store answered ("" if unknown)
	body    []byte
	gz      bool
}

// entry is one uuid a worker made.
type entry struct {
	uuid   string
	tenant int
	// states holds what the vCon may be: one when every answer was clear,
	// more after a failed request whose effect is unknown.
	states []state
	// acked are the version ids a store or replace acknowledged.
	acked []string
	// purgedMaybe: a purge may have destroyed some acked versions.
	purgedMaybe bool
}

func (e *entry) live() bool {
	for _, s := range e.states {
		if !s.deleted {
			return true
		}
	}
	return false
}

func (e *entry) certainlyDeleted() bool { return len(e.states) == 1 && e.states[0].deleted }

type sample struct {
	op     string
	d      time.Duration
	err    bool
	failed bool
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

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// NewClient is an HTTPS client that trusts caPEM (the server's certificate
// or its CA) and never decompresses: bytes are compared as stored.
func NewClient(caPEM []byte, conns int) (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("load: no PEM certificate in the CA file")
	}
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12},
		DisableCompression:  true,
		MaxIdleConnsPerHost: conns,
	}}, nil
}

// checkLoopback refuses a server that is not on this host: the generator
// is a test tool and must never load anyone else's service.
func checkLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("load: server URL %q: want https://127.0.0.1:PORT", raw)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("load: server URL %q is not on loopback; the load generator only runs against this host", raw)
	}
	return nil
}

func (r *run) record(s sample, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = append(r.samples, s)
	if !s.err && !s.failed {
		r.counts[s.op]++
	}
	if s.err {
		r.nerr++
		if len(r.errs) < 10 {
			r.errs = append(r.errs, s.op+": "+why)
		}
	}
}

func (r *run) failedAllowed(status int, err error) bool {
	return r.cfg.Faulty && (err != nil || status >= 500)
}

// do sends one request and reads the whole answer.
func (r *run) do(ctx context.Context, method, path string, t Tenant, body []byte, gz bool) (int, http.Header, []byte, error) {
	r.requests.Add(1)
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.cfg.URL+path, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+t.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/vcon")
		if gz {
			req.Header.Set("Content-Encoding", "gzip")
		}
	}
	resp, err := r.client.Do(req)
	if err != nil {
		if r.cfg.Faulty {
			// The server is likely down (a test killed it): do not spin.
			time.Sleep(25 * time.Millisecond)
		}
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
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

// store POSTs a fresh uuid (op "store") or PUTs a new version of one
// (op "replace"). It reports whether the uuid may now exist.
func (r *run) store(ctx context.Context, rnd *mrand.Rand, e *entry, op string) bool {
	t := r.cfg.Tenants[e.tenant]
	body := newVcon(e.uuid, rnd, r.cfg.MaxBody)
	gz := rnd.IntN(4) == 0
	if gz {
		body = gzipped(body)
	}
	method, path := "POST", "/vcons"
	if op == "replace" {
		method, path = "PUT", "/vcons/"+e.uuid
	}
	began := time.Now()
	status, _, answer, err := r.do(ctx, method, path, t, body, gz)
	s := sample{op: op, d: time.Since(began)}
	if ctx.Err() != nil && err != nil {
		return false // the run ended mid-request: not a result
	}
	want := []int{201}
	if op == "replace" {
		switch {
		case len(e.states) == 1 && e.states[0].deleted:
			want = []int{201}
		case len(e.states) == 1:
			want = []int{200}
		default:
			want = []int{200, 201}
		}
	}
	var st struct{ UUID, Version string }
	if err == nil && slices.Contains(want, status) && json.Unmarshal(answer, &st) == nil && st.UUID == e.uuid && st.Version != "" {
		e.states = []state{{version: st.Version, body: body, gz: gz}}
		e.acked = append(e.acked, st.Version)
		r.record(s, "")
		return true
	}
	if r.failedAllowed(status, err) {
		// Stored or not: either is right until an answer settles it.
		e.states = append(e.states, state{body: body, gz: gz})
		s.failed = true
		r.record(s, "")
		return true
	}
	s.err = true
	r.record(s, fmt.Sprintf("%s %s: status %d, want %v: %v %.200s", method, path, status, want, err, answer))
	return op == "replace"
}

// read GETs the vCon and checks it against the model; an answer that
// matches one of several possible states settles the model on it.
func (r *run) read(ctx context.Context, e *entry) {
	t := r.cfg.Tenants[e.tenant]
	began := time.Now()
	status, h, body, err := r.do(ctx, "GET", "/vcons/"+e.uuid, t, nil, false)
	s := sample{op: "read", d: time.Since(began)}
	if ctx.Err() != nil && err != nil {
		return
	}
	if r.failedAllowed(status, err) {
		s.failed = true
		r.record(s, "")
		return
	}
	if err != nil {
		s.err = true
		r.record(s, fmt.Sprintf("GET: %v", err))
		return
	}
	if i := match(e, status, h, body); i >= 0 {
		e.states = []state{e.states[i]}
		r.record(s, "")
		return
	}
	s.err = true
	r.record(s, fmt.Sprintf("GET: status %d, %d bytes, matches none of the %d states the answers so far allow", status, len(body), len(e.states)))
}

// match returns the index of the state the answer shows, or -1.
func match(e *entry, status int, h http.Header, body []byte) int {
	for i, st := range e.states {
		switch {
		case st.deleted && status == 404:
			return i
		case !st.deleted && status == 200 && bytes.Equal(body, st.body) &&
			(st.version == "" || h.Get("ETag") == `"`+st.version+`"`) &&
			(h.Get("Content-Encoding") == "gzip") == st.gz:
			return i
		}
	}
	return -1
}

func (r *run) delete(ctx context.Context, e *entry) {
	t := r.cfg.Tenants[e.tenant]
	op := "delete"
	if t.Purge {
		op = "purge"
	}
	began := time.Now()
	status, _, answer, err := r.do(ctx, "DELETE", "/vcons/"+e.uuid, t, nil, false)
	s := sample{op: op, d: time.Since(began)}
	if ctx.Err() != nil && err != nil {
		return
	}
	want := []int{204}
	if len(e.states) > 1 {
		want = []int{204, 404}
	}
	switch {
	case err == nil && slices.Contains(want, status):
		e.states = []state{{deleted: true}}
		e.purgedMaybe = e.purgedMaybe || t.Purge
	case r.failedAllowed(status, err):
		e.states = append(e.states, state{deleted: true})
		e.purgedMaybe = e.purgedMaybe || t.Purge
		s.failed = true
	default:
		s.err = true
		r.record(s, fmt.Sprintf("DELETE: status %d, want %v: %v %.200s", status, want, err, answer))
		return
	}
	r.record(s, "")
}

// verify reads the vCon back once the load is over: it must show one of
// the states the model allows, and every acknowledged version must still
// be listed unless a purge may have taken it.
func (r *run) verify(ctx context.Context, e *entry) bool {
	t := r.cfg.Tenants[e.tenant]
	status, h, body, err := r.do(ctx, "GET", "/vcons/"+e.uuid, t, nil, false)
	if err != nil || match(e, status, h, body) < 0 {
		r.record(sample{op: "verify", err: true}, fmt.Sprintf("verify GET %s: status %d, %d bytes, %v: not what was acknowledged", e.uuid, status, len(body), err))
		return false
	}
	if t.Purge || len(e.acked) == 0 {
		// A 0d tenant's replaced versions are purged by the sweep: only
		// the current one is promised, and GET checked it.
		return true
	}
	status, _, body, err = r.do(ctx, "GET", "/vcons/"+e.uuid+"/versions", t, nil, false)
	var vs struct {
		Versions []struct{ Version string }
	}
	if err != nil || status != 200 || json.Unmarshal(body, &vs) != nil {
		r.record(sample{op: "verify", err: true}, fmt.Sprintf("verify versions %s: status %d, %v", e.uuid, status, err))
		return false
	}
	listed := map[string]bool{}
	for _, v := range vs.Versions {
		listed[v.Version] = true
	}
	for _, v := range e.acked {
		if !listed[v] {
			r.record(sample{op: "verify", err: true}, fmt.Sprintf("verify versions %s: acknowledged version %s is not kept", e.uuid, v))
			return false
		}
	}
	return true
}

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := fmt.Sprintf("%x", b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// newVcon is an unsigned vCon of a random size up to max, its padding
// random (so gzip cannot shrink it to nothing, and no two are alike).
func newVcon(uuid string, rnd *mrand.Rand, max int) []byte {
	n := 200 + rnd.IntN(max)
	pad := make([]byte, n*3/4)
	for i := range pad {
		pad[i] = byte(rnd.Uint32())
	}
	return fmt.Appendf(nil, `{"vcon":"0.4.0","uuid":%q,"created_at":%q,"subject":"load %d","parties":[{"tel":"+1555%07d","name":"Load Caller"}],"dialog":[],"attachments":[{"type":"pad","encoding":"base64url","body":%q}],"analysis":[]}`,
		uuid, time.Now().UTC().Format(time.RFC3339), n, rnd.IntN(10000000), base64.RawURLEncoding.EncodeToString(pad))
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// JSON is the report as one line.
func (rep Report) JSON() string {
	b, _ := json.Marshal(rep)
	return string(b)
}

// Summary is a short human line: ops sorted by name.
func (rep Report) Summary() string {
	ops := make([]string, 0, len(rep.Ops))
	for op := range rep.Ops {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	var b strings.Builder
	fmt.Fprintf(&b, "%d requests in %.1fs (%.0f/s), errors=%d failed=%d acked=%d verified=%d lost=%d;",
		rep.Requests, rep.Duration, rep.Throughput, rep.Errors, rep.Failed, rep.VersionsAcked, rep.Verified, rep.Lost)
	for _, op := range ops {
		s := rep.Ops[op]
		fmt.Fprintf(&b, " %s=%d p50=%.1fms p99=%.1fms", op, s.Count, s.P50, s.P99)
	}
	return b.String()
}

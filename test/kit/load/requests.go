package load

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"time"
)

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

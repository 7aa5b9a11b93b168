package server

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"time"
)

// Replica is the catalog's replica as the API sees it (docs/disaster-recovery.md):
// Admit before a write, Acknowledge after it committed and before its
// answer, so that max_lag is a promise an acknowledged write can hold;
// Done when a write Admit let in ends.
type Replica interface {
	Admit(ctx context.Context) error
	Acknowledge(ctx context.Context) error
	Done()
	MaxLag() time.Duration
}

const (
	msgReplicaBehind = "the server's catalog replica is behind, so no change is taken now; nothing was stored; retry later"
	msgReplicaUnsure = "the change is stored on the server but its catalog replica did not take it in time, so it is not acknowledged; retry later: a retried POST answers 409 once it is in"
)

// gated runs an authenticated route's handler; a request that may change
// the catalog (any but GET) waits for the replica, after its key was
// checked. With max_lag 0 the answer is held until the change is
// replicated: the handler writes into a buffer, and a 2xx is sent only
// after Acknowledge. A refused request never reaches h.
func (s *Server) gated(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.Replica == nil || r.Method == http.MethodGet {
			h(w, r)
			return
		}
		if err := s.Replica.Admit(r.Context()); err != nil {
			s.Log.Warn("write refused: the catalog's replica is behind", "error", err.Error())
			replicaUnavailable(w, msgReplicaBehind, s.Replica.MaxLag())
			return
		}
		defer s.Replica.Done()
		if s.Replica.MaxLag() > 0 {
			h(retryLater{w, s.Replica.MaxLag()}, r)
			s.Replica.Acknowledge(r.Context())
			return
		}
		b := &heldAnswer{header: http.Header{}}
		h(b, r)
		if b.status == http.StatusServiceUnavailable && b.header.Get("Retry-After") == "" {
			b.header.Set("Retry-After", "1")
		}
		if b.status < 300 {
			if err := s.Replica.Acknowledge(context.WithoutCancel(r.Context())); err != nil {
				s.Log.Warn("write not acknowledged: the catalog's replica did not take it", "error", err.Error())
				replicaUnavailable(w, msgReplicaUnsure, 0)
				return
			}
		}
		b.sendTo(w)
	}
}

func replicaUnavailable(w http.ResponseWriter, msg string, lag time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(lag/time.Second))))
	writeError(w, http.StatusServiceUnavailable, msg)
}

// retryLater adds Retry-After to a handler's 503 (a 0d DELETE whose purge
// waits for the replica) as to the wrapper's own.
type retryLater struct {
	http.ResponseWriter
	lag time.Duration
}

func (w retryLater) WriteHeader(code int) {
	if code == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(w.lag/time.Second))))
	}
	w.ResponseWriter.WriteHeader(code)
}

// heldAnswer is a response kept back until the replica has the change.
// The answers of writes are small JSON documents.
type heldAnswer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *heldAnswer) Header() http.Header { return a.header }

func (a *heldAnswer) WriteHeader(code int) {
	if a.status == 0 {
		a.status = code
	}
}

func (a *heldAnswer) Write(p []byte) (int, error) {
	a.WriteHeader(http.StatusOK)
	return a.body.Write(p)
}

// sendTo sends the answer kept to w.
func (a *heldAnswer) sendTo(w http.ResponseWriter) {
	for k, v := range a.header {
		w.Header()[k] = v
	}
	if a.status == 0 {
		a.status = http.StatusOK // a handler that wrote nothing
	}
	w.WriteHeader(a.status)
	w.Write(a.body.Bytes())
}

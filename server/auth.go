package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
)

type keyCtx struct{}

// caller is who a request speaks for, as its audit records name it.
func actor(k catalog.Key) string { return "key:" + k.ID }

func keyOf(r *http.Request) catalog.Key { return r.Context().Value(keyCtx{}).(catalog.Key) }

// auditCtx holds whether a tenant route's handler committed the request's
// audit record itself, in the transaction of its change (a store).
type auditCtx struct{}

// recorded tells tenantRoute that the request's record is committed.
func recorded(r *http.Request) {
	if done, ok := r.Context().Value(auditCtx{}).(*bool); ok {
		*done = true
	}
}

// authenticate resolves the bearer token on every request, straight from
// the catalog, so a key created or revoked by the CLI applies at once. A
// request without a valid token is refused before any tenant is known, so
// its record goes to the admin log.
func (s *Server) authenticate(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r)
		var k catalog.Key
		var err error
		if ok {
			k, err = s.Cat.KeyByToken(r.Context(), strings.TrimSpace(token))
		}
		if !ok || err != nil {
			if err != nil && !errors.Is(err, catalog.ErrNotFound) {
				s.internal(w, r, err)
				return
			}
			s.Cat.NoteAdminLog(context.WithoutCancel(r.Context()), catalog.Record{Actor: "anonymous", Action: "authenticate", Status: http.StatusUnauthorized})
			w.Header().Set("WWW-Authenticate", `Bearer realm="vcon-server"`)
			writeError(w, http.StatusUnauthorized, "a valid API key is needed: send Authorization: Bearer <token>")
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), keyCtx{}, k)))
	}
}

// bearer is the token of an "Authorization: Bearer <token>" header; the
// scheme's case does not matter (RFC 9110, section 11.1).
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(token), true
}

// tenantRoute serves a route of the vCon API: a tenant key holding scope.
func (s *Server) tenantRoute(scope, action string, h func(http.ResponseWriter, *http.Request, catalog.Key) (int, string)) http.HandlerFunc {
	return s.authenticate(func(w http.ResponseWriter, r *http.Request) {
		k := keyOf(r)
		if k.Operator() {
			writeError(w, http.StatusForbidden, "an operator key cannot use the vCon API; use a tenant key")
			return
		}
		if !k.Has(scope) {
			s.audit(r, k, action, r.PathValue("uuid"), http.StatusForbidden)
			writeError(w, http.StatusForbidden, "this key lacks the "+scope+" scope")
			return
		}
		if msg := badQuery(r); msg != "" {
			s.audit(r, k, action, r.PathValue("uuid"), http.StatusBadRequest)
			writeError(w, http.StatusBadRequest, msg)
			return
		}
		if decidedRoute(action) && enforces(k) {
			p, status, msg := resolvePurpose(k, r)
			if status != 0 {
				s.audit(r, k, action, r.PathValue("uuid"), status)
				writeError(w, status, msg)
				return
			}
			r = withPurpose(r, &purposeNote{purpose: p})
		}
		var status int
		var done bool
		target := r.PathValue("uuid")
		r = r.WithContext(context.WithValue(r.Context(), auditCtx{}, &done))
		if recordsAfter(action) {
			s.gated(func(w http.ResponseWriter, r *http.Request) {
				status, target = s.indexedChange(w, r, k, action, h)
				done = true
			})(w, r)
		} else {
			s.gated(func(w http.ResponseWriter, r *http.Request) { status, target = h(w, r, k) })(w, r)
		}
		if status == 0 {
			status = http.StatusServiceUnavailable // refused: the replica is behind
		}
		if !done {
			s.audit(r, k, action, target, status)
		}
		if (action == "delete" || action == "erasure") && status < 300 {
			s.Logs.Poke() // a delete's or an erasure's records signed at once
		}
	})
}

// recordsAfter reports whether the record of a change on route action is
// written once its handler has answered, rather than by the handler in
// the change's own transaction (a store, which names it itself).
func recordsAfter(action string) bool { return action == "delete" || action == "erasure" }

// indexedChange runs h, a change's handler whose record is written once
// it has answered (recordsAfter), with its answer held back: the record
// is committed first, so that a change's answer names its record's index
// (Vcon-Audit-Index), taken from the append itself (catalog.Appended).
// The answers of these routes are small JSON documents.
func (s *Server) indexedChange(w http.ResponseWriter, r *http.Request, k catalog.Key, action string,
	h func(http.ResponseWriter, *http.Request, catalog.Key) (int, string)) (int, string) {
	ctx, appended := catalog.WithAppended(r.Context())
	r = r.WithContext(ctx)
	held := &heldAnswer{header: http.Header{}}
	status, target := h(held, r, k)
	// The appends of the handler (an erasure's own records, a 0d
	// delete's purges) came first: the request's record is the last.
	if s.audit(r, k, action, target, status) && changes(action, status) {
		setAuditIndex(held.header, appended, catalog.LogID(*k.Tenant))
	}
	held.sendTo(w)
	return status, target
}

// setAuditIndex names in h the index of the last record appended to log
// by the request, when it appended one.
func setAuditIndex(h http.Header, a *catalog.Appended, log []byte) {
	if i, ok := a.Index(log); ok {
		h.Set("Vcon-Audit-Index", strconv.FormatUint(i, 10))
	}
}

// indexedAnswer is the answer of an admin route's change: its status
// line goes out with the index of the change's record in the admin log
// (Vcon-Audit-Index), which the handler's catalog writes committed
// before it answered.
type indexedAnswer struct {
	http.ResponseWriter
	appended *catalog.Appended
	wrote    bool
}

func (w *indexedAnswer) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		setAuditIndex(w.Header(), w.appended, catalog.AdminLogID)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *indexedAnswer) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *indexedAnswer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// operatorRoute serves an admin route: an operator key holding scope. A
// refusal for a missing scope goes to the admin log, which has every
// operator key's requests.
func (s *Server) operatorRoute(scope string, h http.HandlerFunc) http.HandlerFunc {
	return s.authenticate(func(w http.ResponseWriter, r *http.Request) {
		k := keyOf(r)
		if !k.Operator() {
			s.audit(r, k, "admin", "", http.StatusForbidden)
			writeError(w, http.StatusForbidden, "this route needs an operator key")
			return
		}
		if !k.Has(scope) {
			rec := catalog.Record{Actor: actor(k), Label: k.Label, Action: "admin", Target: "scope=" + scope, Status: http.StatusForbidden}
			if id, err := ids.Parse(r.PathValue("id")); err == nil {
				rec.Tenant = id.String()
			}
			if err := s.Cat.NoteAdminLog(context.WithoutCancel(r.Context()), rec); err != nil {
				s.Log.Error("admin log record failed", "error", err.Error())
			}
			writeError(w, http.StatusForbidden, "this operator key lacks the "+scope+" scope this route needs")
			return
		}
		if msg := badQuery(r); msg != "" {
			writeError(w, http.StatusBadRequest, msg)
			return
		}
		if r.Method != http.MethodGet {
			ctx, appended := catalog.WithAppended(r.Context())
			r = r.WithContext(ctx)
			w = &indexedAnswer{ResponseWriter: w, appended: appended}
		}
		s.gated(h)(w, r)
		if r.Method != http.MethodGet {
			s.Logs.Poke() // a tenant change's records signed at once
		}
	})
}

// audit writes the request's record to its tenant's log, and reports
// whether it did.
func (s *Server) audit(r *http.Request, k catalog.Key, action, target string, status int) bool {
	if k.Tenant == nil {
		return false
	}
	if id, err := ids.Parse(target); err == nil {
		target = id.String()
	} else if !strings.HasPrefix(target, "filters=") && !strings.HasPrefix(target, "erasure=") && !strings.HasPrefix(target, "uuids=") {
		target = "" // a malformed uuid is the caller's text: never record it
	}
	write := s.Cat.Audit
	if !changes(action, status) {
		write = s.Cat.NoteAudit
	}
	err := write(context.WithoutCancel(r.Context()), *k.Tenant, catalog.Record{Actor: actor(k), Label: k.Label, Action: purposeAction(action, r), Target: target, Status: status})
	if err != nil {
		s.Log.Error("audit record failed", "error", err.Error())
		return false
	}
	return true
}

// changes reports whether a request may have changed what the catalog
// holds: its record is then committed synced, as the change was; the
// record of a read or of a refusal is a note, committed before the answer
// and synced within a second (docs/keys-and-audit.md). A 500 may follow a
// change made before the failure.
func changes(action string, status int) bool {
	switch baseAction(action) {
	case "read", "versions", "list", "erasure_read", "mcp", "mcp_call":
		return false
	}
	return status < 400 || status == http.StatusInternalServerError
}

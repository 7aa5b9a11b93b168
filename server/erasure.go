package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/auditlog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/receipt"
	"github.com/vcon-server/vcon-server/vcon"
)

// Erasures for a data subject (docs/erasure.md): POST /erasures runs one
// to its end and answers with its signed receipt; GET /erasures/{id}
// answers the same again; GET /.well-known/jwks.json serves the public
// keys a receipt is checked with.

const (
	msgErased             = "a vCon with this uuid was erased for a data subject, and this server does not store it again; docs/erasure.md says for how long"
	msgEraseSearchOff     = "search is off for this tenant, and an erasure by party looks the party up in its index; an operator turns search on with vcon-server tenant set-search, and once GET /vcons?tel=... answers complete: true, send the erasure again (or erase by uuids)"
	msgEraseIndexBuilding = "this tenant's search index is still being built, so an erasure by party could erase less than it claims; nothing was changed: send it again once GET /vcons?tel=... answers complete: true, or erase by uuids"
	msgEraseNothing       = "the filter normalises to nothing a party is indexed by (a tel needs digits), so it would erase nothing; nothing was changed"
	msgEraseBody          = `send a JSON object with exactly one of "tel", "mailto" or "name" (a non-empty string) or "uuids" (a list of uuids)`
)

func msgEraseTooMany(e *catalog.TooManyError) string {
	return "the filter matches more than the " + strconv.Itoa(e.Limit) +
		" vCons one erasure takes; nothing was changed: list them with GET /vcons and the same filter, erase them by uuids " +
		strconv.Itoa(e.Limit) + " at a time, then send this filter again for the rest"
}

const (
	msgEraseType = "send the erasure as JSON, with Content-Type: application/json; nothing was changed"
	msgEraseRate = "this tenant's erasures named more uuids in the last minute than it may (docs/erasure.md, \"Large erasures\"); nothing was changed: send it again after the seconds Retry-After says"
	msgEraseNext = "after is not a uuid: take the next of an earlier answer as it is"
)

// maxEraseBody bounds a POST /erasures body: 10,000 uuids of 36
// characters each, quoted, with room to spare.
const maxEraseBody = 1 << 20

// eraseBody is what POST /erasures takes; exactly one field is set.
type eraseBody struct {
	Tel    *string  `json:"tel"`
	Mailto *string  `json:"mailto"`
	Name   *string  `json:"name"`
	UUIDs  []string `json:"uuids"`
}

// eraseMembers are eraseBody's members, each refused twice in a body.
var eraseMembers = []string{"tel", "mailto", "name", "uuids"}

// parseErase reads the request, or says what is wrong with it: one JSON
// object and nothing after it, no member twice (the scanner that reads
// a vCon checks both), then exactly one filter.
func parseErase(b []byte) (archive.EraseRequest, string) {
	var req archive.EraseRequest
	var bad *vcon.InvalidError
	if err := vcon.CheckObject(b, eraseMembers); errors.As(err, &bad) {
		return req, bad.Reason + "; " + msgEraseBody
	} else if err != nil {
		return req, msgEraseBody
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var body eraseBody
	if err := d.Decode(&body); err != nil {
		return req, msgEraseBody
	}
	n := 0
	for kind, v := range map[string]*string{"tel": body.Tel, "mailto": body.Mailto, "name": body.Name} {
		if v != nil {
			n++
			req.Kind, req.Value = kind, *v
			if *v == "" {
				return req, msgEraseBody
			}
		}
	}
	if body.UUIDs != nil {
		n++
		req.Kind = "uuids"
		if len(body.UUIDs) == 0 {
			return req, msgEraseBody
		}
		seen := map[ids.ID]bool{}
		for _, s := range body.UUIDs {
			id, err := ids.Parse(s)
			if err != nil {
				return req, "uuids holds an entry that is not a uuid; nothing was changed"
			}
			if !seen[id] {
				seen[id] = true
				req.UUIDs = append(req.UUIDs, id)
			}
		}
	}
	if n != 1 {
		return req, msgEraseBody
	}
	return req, ""
}

// jsonBody reports whether r says its body is JSON.
func jsonBody(r *http.Request) bool {
	t, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && t == "application/json"
}

// erasureJSON is the answer of POST /erasures and GET /erasures/{id}:
// one page of the uuids the erasure took (erased) or found held, with
// next naming the following page (null on the last). state is "done"
// with the receipt, and the digest of every page's lists once they hold
// more than 100 entries, or "pending" (receipt null, error saying why)
// while its batches or purges wait.
type erasureJSON struct {
	Erasure      string          `json:"erasure"`
	State        string          `json:"state"`
	Erased       []receipt.Item  `json:"erased"`
	Held         []string        `json:"held"`
	NotFound     int             `json:"not_found"`
	Unsearchable int             `json:"unsearchable"`
	Reason       string          `json:"reason,omitempty"` // lawful_basis_expired for an erasure at expiry
	Digest       *receipt.Digest `json:"digest,omitempty"`
	Next         *string         `json:"next"`
	Receipt      *string         `json:"receipt"`
	Error        string          `json:"error,omitempty"`
	// Once done: the erasure's record (its erase record, with its
	// counts) in the tenant's audit log, its index and canonical bytes,
	// and, once a checkpoint covers it, its tlog-proof against the newest
	// checkpoint (docs/erasure.md, "The erasure in the audit log"). Beside
	// the receipt, not in it: the receipt is signed in the transaction
	// that appends the record, before any checkpoint can cover it.
	AuditIndex  *uint64 `json:"audit_index,omitempty"`
	AuditRecord *string `json:"audit_record,omitempty"`
	AuditProof  *string `json:"audit_proof,omitempty"`
}

// erasureView is the page of e after the uuid after (nil: the first).
func (s *Server) erasureView(ctx context.Context, e catalog.Erasure, after *ids.ID) (erasureJSON, error) {
	page, more, err := s.Cat.ErasedPage(ctx, e.ID, after, archive.ErasedPageSize)
	if err != nil {
		return erasureJSON{}, err
	}
	erased, held := archive.Lists(page)
	j := erasureJSON{Erasure: e.ID.String(), State: "pending", Erased: erased, Held: held, NotFound: e.NotFound,
		Unsearchable: e.Unsearchable, Reason: e.Reason, Error: e.Error}
	if more {
		next := "/erasures/" + e.ID.String() + "?after=" + page[len(page)-1].UUID.String()
		j.Next = &next
	}
	if e.DoneAt != nil {
		j.State, j.Receipt, j.Error = "done", &e.Receipt, ""
		if e.Digest != "" {
			j.Digest = &receipt.Digest{SHA256: e.Digest, Erased: e.Totals.Vcons, Versions: e.Totals.Versions, Held: e.Totals.Held}
		}
		if e.AuditIndex != nil {
			if err := s.erasureProof(ctx, &j, e.Tenant, *e.AuditIndex); err != nil {
				return erasureJSON{}, err
			}
		}
	}
	return j, nil
}

// erasureProof adds to j the erasure's record at index of tenant's log,
// and its inclusion proof once the newest checkpoint covers it.
func (s *Server) erasureProof(ctx context.Context, j *erasureJSON, tenant ids.ID, index uint64) error {
	log := catalog.LogID(tenant)
	rec, err := s.Cat.LogEntries(ctx, log, index, 1)
	if err != nil {
		return err
	}
	text := string(rec[0])
	j.AuditIndex, j.AuditRecord = &index, &text
	if s.Logs == nil {
		return nil
	}
	p, err := s.Logs.Proof(ctx, log, index)
	if errors.Is(err, auditlog.ErrNoTile) {
		return nil // signed within a second: asked again, the answer has it
	}
	if err != nil {
		return err
	}
	proof := string(p)
	j.AuditProof = &proof
	return nil
}

// erase serves POST /erasures, within the tenants' budgets.
func (s *Server) erase(budget *eraseBudget) func(http.ResponseWriter, *http.Request, catalog.Key) (int, string) {
	return func(w http.ResponseWriter, r *http.Request, k catalog.Key) (int, string) {
		if !jsonBody(r) {
			return s.fail(w, r, http.StatusUnsupportedMediaType, msgEraseType), ""
		}
		b, err := io.ReadAll(io.LimitReader(r.Body, maxEraseBody+1))
		if err != nil {
			return s.fail(w, r, http.StatusBadRequest, "the body could not be read: "+err.Error()), ""
		}
		if len(b) > maxEraseBody {
			return s.fail(w, r, http.StatusBadRequest, "the body is larger than 1 MiB; "+msgEraseBody), ""
		}
		// Parsing 10,000 uuids keeps a core busy for a while: it takes
		// its turn with the erasures' other such steps, leaving the other
		// cores to every other request.
		done := s.Cat.EraseTurn()
		req, msg := parseErase(b)
		done()
		if msg != "" {
			return s.fail(w, r, http.StatusBadRequest, msg), ""
		}
		req.Tenant, req.Actor, req.Label = *k.Tenant, actor(k), k.Label
		cost := max(len(req.UUIDs), 1)
		if wait := budget.take(req.Tenant, cost); wait > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			return s.fail(w, r, http.StatusTooManyRequests, msgEraseRate), ""
		}
		// A client that goes away does not stop the erasure half way: it
		// runs to its end, and GET /erasures/{id} answers it (docs/erasure.md).
		e, err := s.Archive.Erase(context.WithoutCancel(r.Context()), req)
		var pending *archive.ErasePending
		switch {
		case err != nil && !errors.As(err, &pending):
			budget.charge(req.Tenant, -cost) // refused before anything changed
		case req.Kind != "uuids":
			budget.charge(req.Tenant, e.Totals.Vcons+e.Totals.Held-cost)
		}
		if pending != nil {
			// Nothing it took can be read any more; its bytes are not all
			// gone. The answer says so, with the id to ask again by.
			status := http.StatusInternalServerError
			if pending.Replica {
				status = http.StatusServiceUnavailable
			}
			s.Log.Error("request failed", "route", r.Pattern, "error", err.Error())
			w.Header().Set("Location", "/erasures/"+pending.ID.String())
			writeError(w, status, "erasure "+pending.ID.String()+" destroyed the keys of everything it took, so none of it can be read, but not every purge is done yet; the purge sweep finishes them, and GET /erasures/"+pending.ID.String()+" answers with the receipt once it is done")
			return status, "erasure=" + pending.ID.String()
		}
		if err != nil {
			return s.failErr(w, r, err), ""
		}
		j, err := s.erasureView(r.Context(), e, nil)
		if err != nil {
			return s.failErr(w, r, err), "erasure=" + e.ID.String()
		}
		writeJSON(w, http.StatusOK, j)
		return http.StatusOK, "erasure=" + e.ID.String()
	}
}

// erasure serves GET /erasures/{id}, a page at a time.
func (s *Server) erasure(w http.ResponseWriter, r *http.Request, k catalog.Key) (int, string) {
	id, err := ids.Parse(r.PathValue("id"))
	if err != nil {
		return s.fail(w, r, http.StatusNotFound, "no such erasure"), ""
	}
	var after *ids.ID
	if v, ok := r.URL.Query()["after"]; ok {
		a, err := ids.Parse(v[0])
		if err != nil || len(v) > 1 {
			return s.fail(w, r, http.StatusBadRequest, msgEraseNext), "erasure=" + id.String()
		}
		after = &a
	}
	e, err := s.Cat.Erasure(r.Context(), *k.Tenant, id)
	if errors.Is(err, catalog.ErrNotFound) {
		return s.fail(w, r, http.StatusNotFound, "no such erasure"), "erasure=" + id.String()
	}
	if err != nil {
		return s.failErr(w, r, err), "erasure=" + id.String()
	}
	j, err := s.erasureView(r.Context(), e, after)
	if err != nil {
		return s.failErr(w, r, err), "erasure=" + id.String()
	}
	writeJSON(w, http.StatusOK, j)
	return http.StatusOK, "erasure=" + id.String()
}

// jwks serves GET /.well-known/jwks.json: the public keys of the
// receipts, for anyone.
func (s *Server) jwks(w http.ResponseWriter, r *http.Request) {
	if msg := badQuery(r); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	set, err := archive.JWKS(r.Context(), s.Cat)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "max-age=300")
	writeJSON(w, http.StatusOK, set)
}

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/ids"
	"github.com/vcon-server/vcon-server/receipt"
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

// parseErase reads the request, or says what is wrong with it.
func parseErase(r io.Reader) (archive.EraseRequest, string) {
	var req archive.EraseRequest
	b, err := io.ReadAll(io.LimitReader(r, maxEraseBody+1))
	if err != nil {
		return req, "the body could not be read: " + err.Error()
	}
	if len(b) > maxEraseBody {
		return req, "the body is larger than 1 MiB; " + msgEraseBody
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var body eraseBody
	if err := d.Decode(&body); err != nil || d.More() {
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

// erasureJSON is the answer of POST /erasures and GET /erasures/{id}.
// state is "done" with the receipt, or "pending" (receipt null, error
// saying why) while the purges wait for the sweep.
type erasureJSON struct {
	Erasure      string         `json:"erasure"`
	State        string         `json:"state"`
	Erased       []receipt.Item `json:"erased"`
	Held         []string       `json:"held"`
	Unsearchable int            `json:"unsearchable"`
	Receipt      *string        `json:"receipt"`
	Error        string         `json:"error,omitempty"`
}

func erasureView(e catalog.Erasure) erasureJSON {
	p := archive.Receipt(e, e.RequestedAt)
	j := erasureJSON{Erasure: p.Erasure, State: "pending", Erased: p.Erased, Held: p.Held, Unsearchable: p.Unsearchable, Error: e.Error}
	if e.DoneAt != nil {
		j.State, j.Receipt, j.Error = "done", &e.Receipt, ""
	}
	return j
}

// erase serves POST /erasures.
func (s *Server) erase(w http.ResponseWriter, r *http.Request, k catalog.Key) (int, string) {
	req, msg := parseErase(r.Body)
	if msg != "" {
		return s.fail(w, r, http.StatusBadRequest, msg), ""
	}
	req.Tenant, req.Actor, req.Label = *k.Tenant, actor(k), k.Label
	// A client that goes away does not stop the erasure half way: it
	// runs to its end, and GET /erasures/{id} answers it (docs/erasure.md).
	e, err := s.Archive.Erase(context.WithoutCancel(r.Context()), req)
	var pending *archive.ErasePending
	if errors.As(err, &pending) {
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
	writeJSON(w, http.StatusOK, erasureView(e))
	return http.StatusOK, "erasure=" + e.ID.String()
}

// erasure serves GET /erasures/{id}.
func (s *Server) erasure(w http.ResponseWriter, r *http.Request, k catalog.Key) (int, string) {
	id, err := ids.Parse(r.PathValue("id"))
	if err != nil {
		return s.fail(w, r, http.StatusNotFound, "no such erasure"), ""
	}
	e, err := s.Cat.Erasure(r.Context(), *k.Tenant, id)
	if errors.Is(err, catalog.ErrNotFound) {
		return s.fail(w, r, http.StatusNotFound, "no such erasure"), "erasure=" + id.String()
	}
	if err != nil {
		return s.failErr(w, r, err), "erasure=" + id.String()
	}
	writeJSON(w, http.StatusOK, erasureView(e))
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

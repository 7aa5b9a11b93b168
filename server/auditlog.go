package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/auditlog"
	"github.com/vcon-server/vcon-server/internal/translog"
)

// The audit logs over HTTPS (docs/audit-log.md): a tenant key with the
// audit scope reads its tenant's log under /audit/log/, an operator key
// with the log scope the admin log under /admin/log/, each in the C2SP
// tlog-tiles layout with its checkpoint, verifier key and tlog-proof
// inclusion proofs. A read of a log is not recorded in it: a client
// polling the checkpoint would grow the log it watches, one record a
// poll (a refusal is recorded as any is).

// logRoutes are the routes of one log: prefix /audit/log or /admin/log.
type logRoute func(w http.ResponseWriter, r *http.Request, log []byte) int

// tenantLog serves h for the tenant of a tenant key.
func (s *Server) tenantLog(h logRoute) func(http.ResponseWriter, *http.Request, catalog.Key) (int, string) {
	return func(w http.ResponseWriter, r *http.Request, k catalog.Key) (int, string) {
		status := s.logAnswer(w, r, catalog.LogID(*k.Tenant), h)
		if status < 400 {
			recorded(r) // a read of the log is not a record of it
		}
		return status, ""
	}
}

// adminLogRoute serves h for the admin log.
func (s *Server) adminLogRoute(h logRoute) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { s.logAnswer(w, r, catalog.AdminLogID, h) }
}

func (s *Server) logAnswer(w http.ResponseWriter, r *http.Request, log []byte, h logRoute) int {
	if s.Logs == nil {
		return s.fail(w, r, http.StatusServiceUnavailable, "the audit logs are not published by this server")
	}
	return h(w, r, log)
}

func (s *Server) logFail(w http.ResponseWriter, r *http.Request, err error) int {
	if errors.Is(err, auditlog.ErrNoTile) {
		return s.fail(w, r, http.StatusNotFound, auditlog.ErrNoTile.Error())
	}
	return s.failErr(w, r, err)
}

func text(w http.ResponseWriter, ctype, cache string, body []byte) int {
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", cache)
	w.WriteHeader(http.StatusOK)
	w.Write(body)
	return http.StatusOK
}

const (
	noteType  = "text/plain; charset=utf-8"
	tileType  = "application/octet-stream"
	mutable   = "no-cache"                             // the checkpoint, the proof: tlog-tiles, seconds at most
	immutable = "private, max-age=31536000, immutable" // tiles and bundles never change
)

// logCheckpoint serves the log's newest signed checkpoint.
func (s *Server) logCheckpoint(w http.ResponseWriter, r *http.Request, log []byte) int {
	note, _, err := s.Logs.Checkpoint(r.Context(), log)
	if err != nil {
		return s.logFail(w, r, err)
	}
	return text(w, noteType, mutable, note)
}

// logKey serves the log's verifier key, one line.
func (s *Server) logKey(w http.ResponseWriter, r *http.Request, log []byte) int {
	return text(w, noteType, "max-age=300", []byte(s.Logs.VerifierKey(log)+"\n"))
}

// logTile serves a tile or an entry bundle, the path after tile/.
func (s *Server) logTile(w http.ResponseWriter, r *http.Request, log []byte) int {
	t, err := translog.ParseTile(r.PathValue("path"))
	if err != nil {
		return s.fail(w, r, http.StatusNotFound, "no such tile: "+err.Error())
	}
	b, err := s.Logs.Tile(r.Context(), log, t)
	if err != nil {
		return s.logFail(w, r, err)
	}
	return text(w, tileType, immutable, b)
}

// logProof serves the tlog-proof of the record at index against the
// newest checkpoint.
func (s *Server) logProof(w http.ResponseWriter, r *http.Request, log []byte) int {
	index, err := strconv.ParseUint(r.URL.Query().Get("index"), 10, 64)
	if err != nil {
		return s.fail(w, r, http.StatusBadRequest, "index must be a record's index in the log, a number from 0")
	}
	b, err := s.Logs.Proof(r.Context(), log, index)
	if err != nil {
		return s.logFail(w, r, err)
	}
	return text(w, noteType, mutable, b)
}

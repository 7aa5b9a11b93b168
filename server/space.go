package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/vcon-server/vcon-server/archive"
)

// Disk is the free-space line of the data directory (diskspace.Monitor):
// below it stores and replacements are refused with 507 before any byte
// is read, while reads, deletes, purges and admin changes go on
// (docs/troubleshooting.md, "The disk is low").
type Disk interface {
	Low() bool
	Refused()
}

// msgDiskLow is the 507's error. It says what an operator fixes and a
// client waits for, never a tenant or an amount: every tenant shares the
// disk, and its size is the operator's business.
const msgDiskLow = "the server's disk is low on free space; stores are refused until an operator frees space, try again later"

// retryAfter is the Retry-After of a 507, in seconds: about the time an
// operator's purge or a grown file system takes to show.
const retryAfter = 60

// refuseLowDisk answers a store 507 when the disk is below the line.
func (s *Server) refuseLowDisk(w http.ResponseWriter) (int, bool) {
	if s.Disk == nil || !s.Disk.Low() {
		return 0, false
	}
	s.Disk.Refused()
	return s.insufficientStorage(w), true
}

// insufficientStorage answers 507: a store refused early, or any request
// whose write the disk or the bucket refused for space even after the
// reserve (internal/reserve).
func (s *Server) insufficientStorage(w http.ResponseWriter) int {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	writeError(w, http.StatusInsufficientStorage, msgDiskLow)
	return http.StatusInsufficientStorage
}

// deleteNoSpace gives a DELETE that a full disk cut short (its 503, with
// what it left and what the operator frees) the Retry-After of a 507: a
// DELETE is how space is freed, so it is answered as a wait, not as a
// refusal to store.
func deleteNoSpace(w http.ResponseWriter, err error) {
	if errors.Is(err, archive.ErrDeleteNoSpace) || errors.Is(err, archive.ErrPurgeNoSpace) {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
}

// health answers GET /health: 200 {"status":"ok"}, or 503 with the
// reasons an operator must act on now.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if msg := badQuery(r); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	var reasons []string
	if s.Degraded != nil {
		reasons = s.Degraded()
	}
	if len(reasons) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, healthJSON{Status: "degraded", Reasons: reasons})
		return
	}
	writeJSON(w, http.StatusOK, healthJSON{Status: "ok"})
}

type healthJSON struct {
	Status  string   `json:"status"`
	Reasons []string `json:"reasons,omitempty"`
}

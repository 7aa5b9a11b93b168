package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/units"
)

// maxLogPage bounds a page of GET /admin/log: the page is read whole
// before it is sent, so that a slow client never holds the catalog's
// read open, and a thousand records are about 200 KB.
const maxLogPage = 1000

// logLines is the media type of JSON lines, one record each.
const logLines = "application/x-ndjson"

// adminLog serves GET /admin/log: the admin log, oldest first, as the
// JSON lines of `audit export --admin`, a page at a time. since and
// until bound it as they bound the export; a page of more than limit
// records ends with a Next-After header, the after of the next page.
func (s *Server) adminLog(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var rg catalog.LogRange
	var err error
	if rg.Since, rg.Until, err = units.ParseWindow(q.Get("since"), q.Get("until"), "since", "until"); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	rg.Limit = maxLogPage
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxLogPage {
			writeError(w, http.StatusBadRequest, "limit must be a number from 1 to 1000")
			return
		}
		rg.Limit = n
	}
	if a := q.Get("after"); a != "" {
		if rg.After, err = catalog.ParseCursor(a); err != nil {
			writeError(w, http.StatusBadRequest, "after: "+err.Error())
			return
		}
	}
	page, next, more, err := s.Cat.AdminPage(r.Context(), rg)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	var body bytes.Buffer
	for _, rec := range page {
		b, err := json.Marshal(rec) // as audit export prints it (cli.emit)
		if err != nil {
			s.internal(w, r, err)
			return
		}
		body.Write(b)
		body.WriteByte('\n')
	}
	w.Header().Set("Content-Type", logLines)
	if more {
		w.Header().Set("Next-After", next.String())
	}
	w.WriteHeader(http.StatusOK)
	w.Write(body.Bytes())
}

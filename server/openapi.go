package server

import (
	"net/http"
	"strconv"

	"github.com/vcon-server/vcon-server/docs"
)

// serveOpenAPI answers docs/openapi.json, the API described for machines,
// byte for byte. Like /health it needs no key: it says nothing about any
// tenant.
func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	if msg := badQuery(r); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(docs.OpenAPI)))
	w.WriteHeader(http.StatusOK)
	w.Write(docs.OpenAPI)
}

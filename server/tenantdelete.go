package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
)

const msgTenantDeletePending = "the tenant's key is destroyed: it is unknown to every request and nothing of it opens, but removing its objects and rows could not finish yet; the purge sweep finishes it, and DELETE /admin/tenants/{id} sent again finishes it and answers its receipt"

// DeletionJSON is the answer of a tenant's delete: the receipt with what
// it signs, as the payload names it (docs/api.md, docs/keys.md).
type DeletionJSON struct {
	State    string  `json:"state"`
	Deletion string  `json:"deletion"`
	Tenant   string  `json:"tenant"`
	Vcons    int     `json:"vcons"`
	Versions int     `json:"versions"`
	Digest   string  `json:"digest"`
	Done     *string `json:"done_at"`
	Receipt  *string `json:"receipt"`
}

// DeletionView is d as an answer.
func DeletionView(d catalog.TenantDeletion) DeletionJSON {
	v := DeletionJSON{State: "pending", Deletion: d.ID.String(), Tenant: d.Tenant.String(), Vcons: d.Vcons, Versions: d.Versions, Digest: d.Digest}
	if d.DoneAt != nil {
		t := d.DoneAt.UTC().Format(time.RFC3339Nano)
		v.State, v.Done, v.Receipt = "done", &t, &d.Receipt
	}
	return v
}

// deleteTenant removes a tenant for good (docs/FORMAT.md, "Tenant
// delete"), its name confirmed in the body. A tenant whose delete began
// earlier is unknown to every other route; here its delete is finished,
// and its receipt answered.
func (s *Server) deleteTenant(w http.ResponseWriter, r *http.Request) {
	id, err := ids.Parse(r.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusNotFound, "no such tenant")
		return
	}
	var body struct {
		Confirm string `json:"confirm"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	// Once begun, the delete runs to its end (or to a failure the sweep
	// takes up) even if the client goes: a delete cut between its steps
	// would wait for the next sweep, with its key destroyed already.
	ctx := context.WithoutCancel(r.Context())
	var d catalog.TenantDeletion
	t, err := s.Cat.Tenant(ctx, id)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		d, err = s.Archive.FinishTenantDelete(ctx, id)
		if errors.Is(err, archive.ErrNotFound) {
			writeError(w, http.StatusNotFound, "no such tenant")
			return
		}
	case err != nil:
		s.internal(w, r, err)
		return
	case body.Confirm != t.Name:
		writeError(w, http.StatusBadRequest, `a tenant's delete destroys every version of it for good: confirm it with the body {"confirm":"<the tenant's name>"}`)
		return
	default:
		d, err = s.Archive.DeleteTenant(ctx, id, by(r))
	}
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, DeletionView(d))
}

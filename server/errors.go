package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/kms"
	"github.com/vcon-server/vcon-server/internal/reserve"
	"github.com/vcon-server/vcon-server/vcon"
)

// statusOf is the one table from error kinds to HTTP answers. An error it
// does not know is a 500 whose text stays in the log.
func statusOf(err error) (int, string) {
	var invalid *vcon.InvalidError
	var tooBig *http.MaxBytesError
	var tooMany *catalog.TooManyError
	var ownKey *archive.TenantKeyError
	var keyName *kms.KeyNameError
	var lawful *archive.LawfulBasisRefused
	var unsigned *archive.SignatureRefused
	switch {
	case errors.As(err, &lawful):
		return http.StatusUnprocessableEntity, lawful.Error()
	case errors.As(err, &unsigned):
		return http.StatusUnprocessableEntity, unsigned.Error()
	case errors.Is(err, catalog.ErrKeyRotated):
		return http.StatusServiceUnavailable, "the master key was rotated a moment ago, and this server takes the new key within a second; nothing was done: retry"
	case errors.As(err, &keyName):
		return http.StatusBadRequest, keyName.Error()
	case errors.As(err, &ownKey) && errors.Is(err, kms.ErrRefused):
		return http.StatusForbidden, ownKey.Error()
	case errors.As(err, &ownKey):
		return http.StatusServiceUnavailable, ownKey.Error()
	case errors.As(err, &invalid):
		return http.StatusBadRequest, "not a vCon this server can keep: " + invalid.Reason
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The server's ReadTimeout ended a body that trickled in: the
		// client's doing, so a 4xx, never a 5xx.
		return http.StatusBadRequest, "the request body did not arrive within the server's read timeout; nothing was stored"
	case errors.Is(err, vcon.ErrTooLarge), errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge, "the vCon is larger than max_vcon_size allows"
	case errors.Is(err, archive.ErrUUIDMismatch):
		return http.StatusBadRequest, archive.ErrUUIDMismatch.Error()
	case errors.Is(err, catalog.ErrExists):
		return http.StatusConflict, "a vCon with this uuid is already stored; PUT /vcons/{uuid} stores a new version of it"
	case errors.Is(err, catalog.ErrErased):
		return http.StatusGone, msgErased
	case errors.Is(err, catalog.ErrSearchOff):
		return http.StatusConflict, msgEraseSearchOff
	case errors.Is(err, catalog.ErrIndexIncomplete):
		return http.StatusConflict, msgEraseIndexBuilding
	case errors.As(err, &tooMany):
		return http.StatusUnprocessableEntity, msgEraseTooMany(tooMany)
	case errors.Is(err, archive.ErrEraseNothing):
		return http.StatusBadRequest, msgEraseNothing
	case errors.Is(err, archive.ErrTenantHeld):
		return http.StatusConflict, err.Error()
	case errors.As(err, new(*archive.TenantDeletePending)):
		return http.StatusServiceUnavailable, msgTenantDeletePending
	case errors.Is(err, catalog.ErrHeld):
		return http.StatusConflict, "the vCon is under legal hold; an operator must release the hold before it can be deleted"
	case errors.Is(err, archive.ErrNotFound), errors.Is(err, catalog.ErrNotFound):
		return http.StatusNotFound, "no such vCon"
	case errors.Is(err, archive.ErrDeleteNoSpace):
		return http.StatusServiceUnavailable, archive.ErrDeleteNoSpace.Error()
	case errors.Is(err, archive.ErrPurgeNoSpace):
		return http.StatusServiceUnavailable, archive.ErrPurgeNoSpace.Error()
	case reserve.IsFull(err):
		return http.StatusInsufficientStorage, msgDiskLow
	case errors.Is(err, archive.ErrPurgeAwaitsReplica):
		return http.StatusServiceUnavailable, archive.ErrPurgeAwaitsReplica.Error()
	case errors.Is(err, archive.ErrPurgeIncomplete):
		return http.StatusInternalServerError, archive.ErrPurgeIncomplete.Error()
	}
	return http.StatusInternalServerError, "internal error; the server's log has the details"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // bodies are read by curl and jq, not embedded in HTML
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/units"
	"github.com/vcon-server/vcon-server/internal/vocab"
)

func by(r *http.Request) catalog.Actor {
	k := keyOf(r)
	return catalog.Actor{Name: actor(k), Label: k.Label}
}

// maxJSONBody bounds a JSON request body: an admin route's, a message to
// the MCP endpoint.
const maxJSONBody = 64 << 10

// readJSON decodes a small JSON body strictly: unknown fields refused, and
// anything but white space after the one JSON value too (a body with more
// may mean one thing here and another to a proxy or a log).
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	body := http.MaxBytesReader(w, r.Body, maxJSONBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "the body must be a JSON object: "+err.Error())
		return false
	}
	rest, err := io.ReadAll(io.MultiReader(dec.Buffered(), body))
	if err != nil {
		writeError(w, http.StatusBadRequest, "the body must be a JSON object: "+err.Error())
		return false
	}
	if more := bytes.TrimLeft(rest, " \t\r\n"); len(more) > 0 {
		at := dec.InputOffset() + int64(len(rest)-len(more))
		writeError(w, http.StatusBadRequest, fmt.Sprintf("the body must be a JSON object: more data follows the object at byte %d; send one JSON value only", at))
		return false
	}
	return true
}

func (s *Server) adminTenant(w http.ResponseWriter, r *http.Request) (catalog.Tenant, bool) {
	id, err := ids.Parse(r.PathValue("id"))
	if err == nil {
		t, err := s.Cat.Tenant(r.Context(), id)
		if err == nil {
			return t, true
		}
		if !errors.Is(err, catalog.ErrNotFound) {
			s.internal(w, r, err)
			return t, false
		}
	}
	writeError(w, http.StatusNotFound, "no such tenant")
	return catalog.Tenant{}, false
}

func (s *Server) createTenant(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string `json:"name"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	if err := ValidTenantName(body.Name); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	t, err := s.Archive.NewTenant(r.Context(), body.Name, by(r))
	if errors.Is(err, catalog.ErrNameTaken) {
		writeError(w, http.StatusConflict, "a tenant named "+body.Name+" already exists")
		return
	}
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	w.Header().Set("Location", "/admin/tenants/"+t.ID.String())
	writeJSON(w, http.StatusCreated, TenantView(t))
}

func (s *Server) listTenants(w http.ResponseWriter, r *http.Request) {
	ts, err := s.Cat.Tenants(r.Context())
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, TenantViews(ts))
}

func (s *Server) showTenant(w http.ResponseWriter, r *http.Request) {
	t, ok := s.adminTenant(w, r)
	if !ok {
		return
	}
	v, err := TenantShown(r.Context(), s.Archive, t, s.Webhooks)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) setMetadata(w http.ResponseWriter, r *http.Request) {
	t, ok := s.adminTenant(w, r)
	if !ok {
		return
	}
	var body struct {
		Metadata string `json:"metadata"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	level, err := vocab.ParseLevel(body.Metadata)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	t, err = s.Cat.SetMetadata(r.Context(), t.ID, level, by(r))
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, TenantView(t))
}

func (s *Server) setRetention(w http.ResponseWriter, r *http.Request) {
	t, ok := s.adminTenant(w, r)
	if !ok {
		return
	}
	var body struct {
		Retention *string `json:"retention"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	var days *int
	if body.Retention != nil {
		d, err := units.ParseDays(*body.Retention)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		n := int(d.Hours() / 24)
		days = &n
	}
	t, err := s.Cat.SetRetention(r.Context(), t.ID, days, by(r))
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, TenantView(t))
}

func (s *Server) hold(held bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t, ok := s.adminTenant(w, r)
		if !ok {
			return
		}
		uuid, err := ids.Parse(r.PathValue("uuid"))
		if err != nil {
			writeError(w, http.StatusBadRequest, "the uuid in the path is not a uuid")
			return
		}
		if err := s.Cat.Hold(r.Context(), t.ID, uuid, held, by(r)); err != nil {
			s.internal(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"tenant": t.ID.String(), "uuid": uuid.String(), "held": held})
	}
}

func (s *Server) listHolds(w http.ResponseWriter, r *http.Request) {
	t, ok := s.adminTenant(w, r)
	if !ok {
		return
	}
	held, err := s.Cat.Holds(r.Context(), t.ID)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	out := make([]string, len(held))
	for i, id := range held {
		out[i] = id.String()
	}
	writeJSON(w, http.StatusOK, map[string]any{"tenant": t.ID.String(), "holds": out})
}

// ValidTenantName keeps names usable in shells and URLs: 1 to 64 of
// a-z, 0-9, '-', '_' and '.', starting with a letter or digit, and never
// a UUID (commands take an id or a name).
func ValidTenantName(name string) error {
	bad := len(name) == 0 || len(name) > 64
	for i, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || (i > 0 && strings.ContainsRune("-_.", c))
		bad = bad || !ok
	}
	if _, err := ids.Parse(name); err == nil {
		bad = true
	}
	if bad {
		return errors.New("a tenant name is 1 to 64 characters of a-z, 0-9, '-', '_' and '.', starting with a letter or digit, and is not a UUID")
	}
	return nil
}

func (s *Server) setSearch(w http.ResponseWriter, r *http.Request) {
	t, ok := s.adminTenant(w, r)
	if !ok {
		return
	}
	var body struct {
		Search string `json:"search"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	mode, err := vocab.ParseSearchMode(body.Search)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	t, err = s.Cat.SetSearch(r.Context(), t.ID, mode, by(r))
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, TenantView(t))
}

// setKey wraps a tenant's key with a KMS key of the tenant's own, or
// under the master key again when kms_key is empty, as tenant set-key does
// (docs/keys.md).
func (s *Server) setKey(w http.ResponseWriter, r *http.Request) {
	t, ok := s.adminTenant(w, r)
	if !ok {
		return
	}
	var body struct {
		KMSKey *string `json:"kms_key"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	if body.KMSKey == nil {
		writeError(w, http.StatusBadRequest, `the body needs "kms_key": the tenant's own key in the key service, or "" for the master key`)
		return
	}
	if *body.KMSKey != "" && s.Archive.KeyServices == nil {
		writeError(w, http.StatusConflict, "the server's configuration has no [kms] table, so a tenant cannot have a key of its own (docs/keys.md)")
		return
	}
	if err := s.Archive.SetTenantKMSKey(r.Context(), t.ID, *body.KMSKey, by(r)); err != nil {
		s.failErr(w, r, err)
		return
	}
	st, err := s.Archive.KeyState(r.Context(), t.ID)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"tenant": t.ID.String(), "key": st})
}

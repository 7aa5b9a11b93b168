package server

import (
	"net/http"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/vcon/lawfulbasis"
)

// LawfulBasisJSON is GET /vcons/{uuid}/lawful-basis (docs/lawful-basis.md):
// what the current version's lawful-basis attachments say, as the catalog
// keeps it. Basis is null without an attachment; Expires null when the
// basis does not expire; Granted and Refused are never null.
type LawfulBasisJSON struct {
	UUID     string   `json:"uuid"`
	Version  string   `json:"version"`
	StoredAt string   `json:"stored_at"`
	Basis    *string  `json:"lawful_basis"`
	Expires  *string  `json:"expires_at"`
	Granted  []string `json:"granted"`
	Refused  []string `json:"refused"`
}

// lawfulBasis serves GET /vcons/{uuid}/lawful-basis from the catalog
// alone: the vCon is not opened, so it costs a read of one row.
func (s *Server) lawfulBasis(w http.ResponseWriter, r *http.Request, k catalog.Key) (int, string) {
	uuid, err := ids.Parse(r.PathValue("uuid"))
	if err != nil {
		return s.fail(w, r, http.StatusNotFound, "no such vCon"), ""
	}
	lb, err := s.Cat.LawfulBasisOf(r.Context(), *k.Tenant, uuid)
	if err != nil {
		return s.failErr(w, r, err), uuid.String()
	}
	writeJSON(w, http.StatusOK, LawfulBasisView(uuid, lb))
	return http.StatusOK, uuid.String()
}

// LawfulBasisView is lb as JSON.
func LawfulBasisView(uuid ids.ID, lb catalog.LawfulBasis) LawfulBasisJSON {
	v := LawfulBasisJSON{UUID: uuid.String(), Version: lb.Version.String(), StoredAt: timeText(lb.StoredAt),
		Granted: append([]string{}, lb.Granted...), Refused: append([]string{}, lb.Refused...)}
	if lb.Basis != lawfulbasis.None {
		b := lb.Basis
		v.Basis = &b
	}
	if lb.Expires != nil {
		t := timeText(*lb.Expires)
		v.Expires = &t
	}
	return v
}

// setLawfulBasis serves PUT /admin/tenants/{id}/lawful-basis, as tenant
// set-lawful-basis does.
func (s *Server) setLawfulBasis(w http.ResponseWriter, r *http.Request) {
	t, ok := s.adminTenant(w, r)
	if !ok {
		return
	}
	var body struct {
		Mode string `json:"lawful_basis"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	mode, err := vocab.ParseLawfulMode(body.Mode)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	t, err = s.Cat.SetLawfulMode(r.Context(), t.ID, mode, by(r))
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, TenantView(t))
}

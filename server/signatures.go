package server

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"net/http"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/vocab"
)

// SignaturesJSON is a tenant's signature policy as tenant set-signatures
// and PUT /admin/tenants/{id}/signatures answer it (docs/signatures.md).
type SignaturesJSON struct {
	Tenant         string              `json:"tenant"`
	Mode           vocab.SignatureMode `json:"signatures"`
	AllowEncrypted bool                `json:"allow_encrypted"`
	Anchors        []AnchorJSON        `json:"anchors"`
}

// AnchorJSON is one trust anchor: its fingerprint, subject and expiry.
type AnchorJSON struct {
	Fingerprint string `json:"fingerprint"`
	Subject     string `json:"subject"`
	NotAfter    string `json:"not_after"`
}

// SignaturesView reads a tenant's policy and anchors.
func SignaturesView(ctx context.Context, cat *catalog.Catalog, t catalog.Tenant) (SignaturesJSON, error) {
	p, err := cat.SignaturePolicyOf(ctx, t.ID)
	if err != nil {
		return SignaturesJSON{}, err
	}
	list, err := cat.Anchors(ctx, t.ID)
	if err != nil {
		return SignaturesJSON{}, err
	}
	v := SignaturesJSON{Tenant: t.Name, Mode: p.Mode, AllowEncrypted: p.AllowEncrypted, Anchors: []AnchorJSON{}}
	for _, a := range list {
		b, _ := pem.Decode([]byte(a.PEM))
		if b == nil {
			continue
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			v.Anchors = append(v.Anchors, AnchorJSON{Fingerprint: a.Fingerprint, Subject: c.Subject.String(), NotAfter: timeText(c.NotAfter)})
		}
	}
	return v, nil
}

// setSignatures serves PUT /admin/tenants/{id}/signatures, as tenant
// set-signatures does: anchors_pem, when given, replaces the anchors.
func (s *Server) setSignatures(w http.ResponseWriter, r *http.Request) {
	t, ok := s.adminTenant(w, r)
	if !ok {
		return
	}
	var body struct {
		Mode           string  `json:"signatures"`
		AllowEncrypted bool    `json:"allow_encrypted"`
		AnchorsPEM     *string `json:"anchors_pem"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	mode, err := vocab.ParseSignatureMode(body.Mode)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var anchors []catalog.Anchor
	if body.AnchorsPEM != nil {
		if anchors, err = archive.ParseAnchors([]byte(*body.AnchorsPEM)); err != nil {
			writeError(w, http.StatusBadRequest, "anchors_pem: "+err.Error())
			return
		}
	}
	if t, err = s.Cat.SetSignatures(r.Context(), t.ID, catalog.SignaturePolicy{Mode: mode, AllowEncrypted: body.AllowEncrypted}, anchors, by(r)); err != nil {
		s.internal(w, r, err)
		return
	}
	v, err := SignaturesView(r.Context(), s.Cat, t)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

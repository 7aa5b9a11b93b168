package server

import (
	"net/http"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/webhook"
)

// setWebhook serves PUT /admin/tenants/{id}/webhook: {"url", "secret",
// "ca"} turns the tenant's webhook on (docs/webhooks.md), {"url": "off"}
// turns it off and drops its events.
func (s *Server) setWebhook(w http.ResponseWriter, r *http.Request) {
	t, ok := s.adminTenant(w, r)
	if !ok {
		return
	}
	var body struct {
		URL    string `json:"url"`
		Secret string `json:"secret"`
		CA     string `json:"ca"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	if body.URL == "off" {
		n, err := s.Cat.DropWebhook(r.Context(), t.ID, by(r))
		if err != nil {
			s.internal(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, WebhookView{Tenant: t.ID.String(), Webhook: "off", Dropped: &n})
		return
	}
	st := webhook.Setting{URL: body.URL, Secret: body.Secret, CAPEM: body.CA}
	if err := st.Check(); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	sealed, err := s.Archive.Key.SealSecret(t.ID, []byte(body.Secret))
	if err != nil {
		s.internal(w, r, err)
		return
	}
	if err := s.Cat.SetWebhook(r.Context(), catalog.Webhook{Tenant: t.ID, URL: body.URL, Secret: sealed, CAPEM: body.CA}, by(r)); err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, WebhookView{Tenant: t.ID.String(), Webhook: "on", URL: body.URL, CA: body.CA != ""})
}

// WebhookView is the answer to a webhook's setting, from the API and the
// command line: never the secret.
type WebhookView struct {
	Tenant  string `json:"tenant"`
	Webhook string `json:"webhook"` // "on" or "off"
	URL     string `json:"url,omitempty"`
	CA      bool   `json:"ca,omitempty"`      // a CA file replaces the system's roots
	Dropped *int   `json:"dropped,omitempty"` // events dropped by turning it off
}

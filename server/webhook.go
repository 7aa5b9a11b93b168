package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/vcon-server/vcon-server/archive"
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
	if err := st.Check(s.Webhooks); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	sealed, err := s.Archive.Key.SealSecret(t.ID, []byte(body.Secret))
	if err != nil {
		s.internal(w, r, err)
		return
	}
	hook := catalog.Webhook{Tenant: t.ID, URL: body.URL, Secret: sealed, CAPEM: body.CA, KeyCheck: s.Archive.Key.CheckValue()}
	if err := s.Cat.SetWebhook(r.Context(), hook, by(r)); err != nil {
		s.failErr(w, r, err)
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

// TenantWebhookJSON is a tenant's webhook as tenant show and GET
// /admin/tenants/{id} show it, named as set-webhook's answer names it:
// where its events go and whether a CA replaces the system's roots; never
// the secret.
type TenantWebhookJSON struct {
	URL string `json:"url"`
	CA  bool   `json:"ca"`
	// Refused says why its events are not delivered: the rules refuse
	// its URL (they fail at once), or its secret does not open (it is
	// parked: they wait until it is set again). Absent when neither.
	Refused string `json:"refused,omitempty"`
}

// TenantShownJSON is one tenant shown alone: the tenant and its webhook,
// null when it has none.
type TenantShownJSON struct {
	TenantJSON
	Webhook *TenantWebhookJSON     `json:"webhook"`
	Key     archive.TenantKeyState `json:"key"`
	// NextExpiry is the earliest expiration of the lawful basis of a
	// current version not held (docs/lawful-basis.md, "Expiry"); null
	// when none expires.
	NextExpiry *string `json:"next_expiry"`
}

// TenantShown reads t's webhook and returns t as one tenant is shown,
// its webhook's URL judged by rules, its key tried by keys.
func TenantShown(ctx context.Context, keys *archive.Archive, t catalog.Tenant, rules webhook.Rules) (TenantShownJSON, error) {
	cat := keys.Cat
	v := TenantShownJSON{TenantJSON: TenantView(t)}
	var err error
	if v.Key, err = keys.KeyState(ctx, t.ID); err != nil {
		return v, err
	}
	next, err := cat.NextLawfulExpiry(ctx, t.ID)
	if err != nil {
		return v, err
	}
	if next != nil {
		s := next.UTC().Format(time.RFC3339Nano)
		v.NextExpiry = &s
	}
	w, err := cat.Webhook(ctx, t.ID)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
	case err != nil:
		return v, err
	default:
		v.Webhook = &TenantWebhookJSON{URL: w.URL, CA: w.CAPEM != "", Refused: w.Parked}
		if err := rules.CheckURL(w.URL); err != nil {
			v.Webhook.Refused = err.Error()
		}
	}
	return v, nil
}

package server

import (
	"strconv"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/vocab"
)

// The JSON views of the catalog's rows: what the admin API answers and
// what the commands print (docs/api.md, docs/keys-and-audit.md). The
// catalog keeps rows; how they read as JSON is decided here alone.

// TenantJSON is a tenant as the admin API answers it and commands print it.
type TenantJSON struct {
	ID        string           `json:"id"`
	Name      string           `json:"name"`
	Metadata  vocab.Level      `json:"metadata"`
	Retention *string          `json:"retention"` // "30d"; null: the server default
	Search    vocab.SearchMode `json:"search"`
	// LawfulBasis is the tenant's lawful-basis mode (docs/lawful-basis.md).
	LawfulBasis vocab.LawfulMode `json:"lawful_basis"`
	CreatedAt   string           `json:"created_at"`
}

// TenantView is t as JSON.
func TenantView(t catalog.Tenant) TenantJSON {
	var ret *string
	if t.RetentionDays != nil {
		s := strconv.Itoa(*t.RetentionDays) + "d"
		ret = &s
	}
	lawful := t.LawfulBasis
	if lawful == "" {
		lawful = vocab.LawfulOff
	}
	return TenantJSON{ID: t.ID.String(), Name: t.Name, Metadata: t.Metadata, Retention: ret, Search: t.Search,
		LawfulBasis: lawful, CreatedAt: t.CreatedAt.Format(time.RFC3339Nano)}
}

// TenantViews is ts as a JSON list, empty rather than null.
func TenantViews(ts []catalog.Tenant) []TenantJSON {
	out := make([]TenantJSON, len(ts))
	for i, t := range ts {
		out[i] = TenantView(t)
	}
	return out
}

// KeyJSON is a key as listed; the token is never part of it.
type KeyJSON struct {
	ID        string   `json:"id"`
	Tenant    *string  `json:"tenant"` // null for an operator key
	Operator  bool     `json:"operator"`
	Scopes    []string `json:"scopes"`
	Purposes  []string `json:"purposes"` // [] for a key bound to none
	Label     string   `json:"label"`
	CreatedAt string   `json:"created_at"`
	RevokedAt *string  `json:"revoked_at"`
}

// KeyView is k as JSON.
func KeyView(k catalog.Key) KeyJSON {
	var tenant, revoked *string
	if k.Tenant != nil {
		s := k.Tenant.String()
		tenant = &s
	}
	if k.RevokedAt != nil {
		s := k.RevokedAt.Format(time.RFC3339Nano)
		revoked = &s
	}
	scopes := k.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	return KeyJSON{ID: k.ID, Tenant: tenant, Operator: k.Operator(), Scopes: scopes, Purposes: append([]string{}, k.Purposes...), Label: k.Label,
		CreatedAt: k.CreatedAt.Format(time.RFC3339Nano), RevokedAt: revoked}
}

package server_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/server"
)

// TestViews pins the JSON of tenants and keys, byte for byte, as the
// admin API answers and the commands print them.
func TestViews(t *testing.T) {
	id, err := ids.Parse("018f6b31-0a77-7b20-8c4d-2e61f0a9b3c5")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 5, 1, 2, 3, 400500600, time.UTC)
	at2 := time.Date(2026, 11, 6, 0, 0, 0, 0, time.FixedZone("x", 3600))
	d, z := 30, 0
	for _, c := range []struct {
		v    any
		want string
	}{
		{server.TenantView(catalog.Tenant{ID: id, Name: "acme", Metadata: vocab.LevelCounts, RetentionDays: &d, CreatedAt: at, Search: vocab.SearchPartiesSubject}),
			`{"id":"018f6b31-0a77-7b20-8c4d-2e61f0a9b3c5","name":"acme","metadata":"counts","retention":"30d","search":"parties+subject","lawful_basis":"off","created_at":"2026-11-05T01:02:03.4005006Z"}`},
		{server.TenantView(catalog.Tenant{ID: id, Name: "x", Metadata: vocab.LevelNone, RetentionDays: &z, CreatedAt: at2, Search: vocab.SearchOff}),
			`{"id":"018f6b31-0a77-7b20-8c4d-2e61f0a9b3c5","name":"x","metadata":"none","retention":"0d","search":"off","lawful_basis":"off","created_at":"2026-11-06T00:00:00+01:00"}`},
		{server.TenantView(catalog.Tenant{ID: id, Name: "x", Metadata: vocab.LevelNone, CreatedAt: at2, Search: vocab.SearchOff}),
			`{"id":"018f6b31-0a77-7b20-8c4d-2e61f0a9b3c5","name":"x","metadata":"none","retention":null,"search":"off","lawful_basis":"off","created_at":"2026-11-06T00:00:00+01:00"}`},
		{server.TenantViews(nil), `[]`},
		{server.KeyView(catalog.Key{ID: "k1", Tenant: &id, Scopes: []string{"read", "write"}, Purposes: []string{"analytics", "customer_service"}, Label: "rec<1>", CreatedAt: at}),
			`{"id":"k1","tenant":"018f6b31-0a77-7b20-8c4d-2e61f0a9b3c5","operator":false,"scopes":["read","write"],"purposes":["analytics","customer_service"],"label":"rec\u003c1\u003e","created_at":"2026-11-05T01:02:03.4005006Z","revoked_at":null}`},
		{server.KeyView(catalog.Key{ID: "k2", Label: "ops", CreatedAt: at, RevokedAt: &at2}),
			`{"id":"k2","tenant":null,"operator":true,"scopes":[],"purposes":[],"label":"ops","created_at":"2026-11-05T01:02:03.4005006Z","revoked_at":"2026-11-06T00:00:00+01:00"}`},
	} {
		b, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("got  %s\nwant %s", b, c.want)
		}
	}
}

package catalog

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestLeafIsJSON holds Leaf's fast path to encoding/json's bytes.
func TestLeafIsJSON(t *testing.T) {
	at := time.Date(2026, 12, 1, 23, 50, 19, 120000000, time.UTC)
	for _, r := range []Record{
		{Time: at, Actor: "key:ab", Label: "ingest", Action: "store", Target: "019ad2c4-7a1e-7cc3-9a55-3d2f1e0b7c11", Status: 201},
		{Time: at, Actor: "server", Label: "retention", Action: "purge", Target: "019ad2c4-7a1e-7cc3-9a55-3d2f1e0b7c11", Status: 200},
		{Time: at, Tenant: "t", Actor: "cli", Action: "tenant_create", Status: 200},
		{Time: at, Actor: "key:ab", Label: `a "label" <b> & ü \ ` + "\x01", Action: "read", Status: 404},
	} {
		want, _ := json.Marshal(leafJSON{Index: 7, Time: r.Time.Format(time.RFC3339Nano), Tenant: r.Tenant, Actor: r.Actor,
			Label: r.Label, Action: r.Action, Lifecycle: Lifecycle(r), Target: r.Target, Status: r.Status})
		if got := Leaf(7, r); string(got) != string(want) || (r.Status == 201 && !strings.Contains(string(got), `"lifecycle":"vcon_created"`)) {
			t.Errorf("Leaf %s, encoding/json %s", got, want)
		}
	}
}

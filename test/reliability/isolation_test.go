package reliability

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

type auditRec struct {
	Actor, Label, Action, Target string
	Status                       int
}

func auditOf(t *testing.T, e *testenv.Env, args ...string) []auditRec {
	t.Helper()
	var out []auditRec
	for _, line := range strings.Split(strings.TrimSpace(e.CLI(append([]string{"audit", "export"}, args...)...)), "\n") {
		if line == "" {
			continue
		}
		var r auditRec
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// TestTenantIsolation tries every route with every kind of key of another
// tenant against a vCon of acme: each read, listing, version listing and
// delete answers 404 (or 403 without the scope), each admin route 403;
// each request leaves one audit record in the key's own tenant and none
// in acme's; a write stores into the key's own tenant and never touches
// acme's vCon.
func TestTenantIsolation(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	a := e.Tenant("acme")
	b := e.Tenant("globex")
	ka := e.NewKey(a, "write", "read", "delete")
	u := ids.NewRandom().String()
	body := apitest.NewVcon(u, "acme's secret", "+15555550100")
	ct := []string{"Content-Type", "application/vcon"}
	if r := e.Do("POST", "/vcons", ka.Token, body, ct...); r.Status != 201 {
		t.Fatal(r.Status)
	}
	if r := e.Do("PUT", "/vcons/"+u, ka.Token, body, ct...); r.Status != 200 {
		t.Fatal(r.Status)
	}
	e.CLI("hold", "set", a, u)
	versionsBefore := e.Do("GET", "/vcons/"+u+"/versions", ka.Token, nil).Body
	auditABefore := len(auditOf(t, e, "--tenant", a))

	scopeSets := [][]string{{"read"}, {"write"}, {"delete"}, {"read", "write"}, {"read", "write", "delete"}}
	type probe struct {
		method, path, scope, action string
		body                        []byte
	}
	// Reads and deletes first: a write below stores u into globex, after
	// which globex has a vCon of that uuid of its own.
	probes := []probe{
		{"GET", "/vcons/" + u, "read", "read", nil},
		{"GET", "/vcons/" + u + "/versions", "read", "versions", nil},
		{"GET", "/vcons", "read", "list", nil},
		{"GET", "/vcons?after=" + u + "&limit=5", "read", "list", nil},
		{"DELETE", "/vcons/" + u, "delete", "delete", nil},
		{"POST", "/admin/tenants", "", "admin", []byte(`{"name":"evil"}`)},
		{"GET", "/admin/tenants", "", "admin", nil},
		{"GET", "/admin/tenants/" + a, "", "admin", nil},
		{"PUT", "/admin/tenants/" + a + "/metadata", "", "admin", []byte(`{"metadata":"full"}`)},
		{"PUT", "/admin/tenants/" + a + "/retention", "", "admin", []byte(`{"retention":"0d"}`)},
		{"GET", "/admin/tenants/" + a + "/holds", "", "admin", nil},
		{"PUT", "/admin/tenants/" + a + "/holds/" + u, "", "admin", nil},
		{"DELETE", "/admin/tenants/" + a + "/holds/" + u, "", "admin", nil},
		{"GET", "/metrics", "", "admin", nil},
	}
	requests := map[string]int{} // key id → requests made
	keys := map[string]testenv.Key{}
	for _, scopes := range scopeSets {
		k := e.NewKey(b, scopes...)
		keys[k.ID] = k
		has := map[string]bool{}
		for _, s := range scopes {
			has[s] = true
		}
		for _, p := range probes {
			r := e.Do(p.method, p.path, k.Token, p.body, ct...)
			requests[k.ID]++
			want := 403
			switch {
			case p.scope == "":
			case !has[p.scope]:
			case p.action == "list":
				want = 200
				var page struct{ UUIDs []string }
				r.JSON(t, &page)
				if len(page.UUIDs) != 0 {
					t.Errorf("globex lists %v", page.UUIDs)
				}
			default:
				want = 404
			}
			if r.Status != want {
				t.Errorf("%v key: %s %s: %d, want %d: %s", scopes, p.method, p.path, r.Status, want, r.Body)
			}
		}
	}
	// Writes last: into globex's own namespace, never acme's.
	other := apitest.NewVcon(u, "globex's own", "+15555550199")
	for id, k := range keys {
		canWrite := keyHas(t, e, b, id, "write")
		for _, w := range []struct {
			method, path string
			ok           []int // with the write scope: into globex's own uuid
		}{{"POST", "/vcons", []int{201, 200}}, {"PUT", "/vcons/" + u, []int{200, 201}}} { // 200: the same bytes again (docs/api.md, "Retries")
			r := e.Do(w.method, w.path, k.Token, other, ct...)
			requests[id]++
			good := r.Status == 403
			if canWrite {
				good = r.Status == w.ok[0] || r.Status == w.ok[1]
			}
			if !good {
				t.Errorf("key %s (write %v): %s %s: %d %s", id, canWrite, w.method, w.path, r.Status, r.Body)
			}
		}
	}

	// acme's vCon, versions, hold and settings are as they were.
	if got := e.Do("GET", "/vcons/"+u, ka.Token, nil); got.Status != 200 || !bytes.Equal(got.Body, body) {
		t.Fatalf("acme's vCon reads %d", got.Status)
	}
	if got := e.Do("GET", "/vcons/"+u+"/versions", ka.Token, nil).Body; !bytes.Equal(got, versionsBefore) {
		t.Fatalf("acme's versions changed:\n%s\n%s", versionsBefore, got)
	}
	if !strings.Contains(e.CLI("hold", "list", a), u) {
		t.Fatal("acme's hold was released")
	}
	if show := e.CLI("tenant", "show", a); strings.Contains(show, `"full"`) || strings.Contains(show, `"0d"`) {
		t.Fatalf("acme's settings changed: %s", show)
	}
	if out := e.CLI("tenant", "list"); strings.Contains(out, "evil") {
		t.Fatal("a tenant key created a tenant")
	}

	// One record per request in globex's log, under the key that made it;
	// none in acme's.
	perKey := map[string]int{}
	for _, r := range auditOf(t, e, "--tenant", b) {
		if r.Actor == "cli" {
			continue
		}
		perKey[strings.TrimPrefix(r.Actor, "key:")]++
		if r.Target != "" && r.Target != u {
			t.Errorf("audit target %q", r.Target)
		}
	}
	for id, n := range requests {
		if perKey[id] != n {
			t.Errorf("key %s made %d requests, globex's audit log has %d records of it", id, n, perKey[id])
		}
	}
	auditA := auditOf(t, e, "--tenant", a)
	if len(auditA) != auditABefore+2 { // the two reads above
		t.Errorf("acme's audit log grew by %d records, want 2 (its own reads)", len(auditA)-auditABefore)
	}
	for _, r := range auditA {
		if _, theirs := keys[strings.TrimPrefix(r.Actor, "key:")]; theirs {
			t.Errorf("acme's audit log records globex's key: %+v", r)
		}
	}
	t.Logf("%d keys × %d routes of another tenant: all refused, %s", len(keys), len(probes)+2, fmt.Sprint(perKey))
}

// keyHas reads a key's scopes from key list.
func keyHas(t *testing.T, e *testenv.Env, tenant, id, scope string) bool {
	for _, line := range strings.Split(strings.TrimSpace(e.CLI("key", "list", "--tenant", tenant)), "\n") {
		var k struct {
			ID     string
			Scopes []string
		}
		if json.Unmarshal([]byte(line), &k) == nil && k.ID == id {
			for _, s := range k.Scopes {
				if s == scope {
					return true
				}
			}
		}
	}
	return false
}

package server_test

import (
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestUnknownQueryParameters: a query parameter a route does not take is
// refused with 400 naming it, on every route, and never ignored; the
// audit record of the refusal holds neither its name nor its value.
func TestUnknownQueryParameters(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read", "delete")
	ops := e.OperatorKey()
	u := ids.NewRandom().String()
	body := apitest.NewVcon(u, "Billing", "+15555550100")
	if r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon"); r.Status != 201 {
		t.Fatalf("POST: %d %s", r.Status, r.Body)
	}
	const list = "GET /vcons takes limit, after, tel, mailto, name, subject"
	none := func(route string) string { return "; " + route + " takes no query parameters" }

	for _, c := range []struct {
		name, method, path, token, want string
	}{
		{"a misspelt filter", "GET", "/vcons?email=ada@example.com", k.Token, `unknown query parameter "email"; ` + list},
		{"beside known ones", "GET", "/vcons?limit=5&colour=red&after=" + u, k.Token, `unknown query parameter "colour"; ` + list},
		{"the first unknown one", "GET", "/vcons?b=1&a=2", k.Token, `unknown query parameter "b"; ` + list},
		{"a name without a value", "GET", "/vcons?verbose", k.Token, `unknown query parameter "verbose"; ` + list},
		{"an escaped name", "GET", "/vcons?na%6De%20x=1", k.Token, `unknown query parameter "name x"; ` + list},
		{"a case the route does not take", "GET", "/vcons?Limit=5", k.Token, `unknown query parameter "Limit"; ` + list},
		{"a long name", "GET", "/vcons?" + strings.Repeat("x", 100) + "=1", k.Token, `unknown query parameter "` + strings.Repeat("x", 64) + `..."; ` + list},
		{"a semicolon", "GET", "/vcons?limit=5;email=x", k.Token, "the query does not parse (invalid semicolon separator in query); send name=value pairs joined by &"},
		{"a bad escape", "GET", "/vcons?tel=%zz", k.Token, `the query does not parse (invalid URL escape "%zz"); send name=value pairs joined by &`},
		{"read", "GET", "/vcons/" + u + "?fields=subject", k.Token, `unknown query parameter "fields"` + none("GET /vcons/{uuid}")},
		{"versions", "GET", "/vcons/" + u + "/versions?limit=1", k.Token, `unknown query parameter "limit"` + none("GET /vcons/{uuid}/versions")},
		{"store", "POST", "/vcons?async=1", k.Token, `unknown query parameter "async"` + none("POST /vcons")},
		{"replace", "PUT", "/vcons/" + u + "?if_absent=1", k.Token, `unknown query parameter "if_absent"` + none("PUT /vcons/{uuid}")},
		{"delete", "DELETE", "/vcons/" + u + "?purge=now", k.Token, `unknown query parameter "purge"` + none("DELETE /vcons/{uuid}")},
		{"health", "GET", "/health?deep=1", "", `unknown query parameter "deep"` + none("GET /health")},
		{"tenants", "GET", "/admin/tenants?name=acme", ops.Token, `unknown query parameter "name"` + none("GET /admin/tenants")},
		{"a tenant", "GET", "/admin/tenants/" + tenant + "?verbose=1", ops.Token, `unknown query parameter "verbose"` + none("GET /admin/tenants/{id}")},
		{"metadata", "PUT", "/admin/tenants/" + tenant + "/metadata?metadata=full", ops.Token, `unknown query parameter "metadata"` + none("PUT /admin/tenants/{id}/metadata")},
		{"holds", "GET", "/admin/tenants/" + tenant + "/holds?x=", ops.Token, `unknown query parameter "x"` + none("GET /admin/tenants/{id}/holds")},
		{"metrics", "GET", "/metrics?name[]=vcon_stores_total", ops.Token, `unknown query parameter "name[]"` + none("GET /metrics")},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.Do(c.method, c.path, c.token, nil)
			want := `{"error":` + jsonString(c.want) + "}\n"
			if r.Status != 400 || string(r.Body) != want {
				t.Errorf("%s %s: %d %s\nwant 400 %s", c.method, c.path, r.Status, r.Body, want)
			}
		})
	}

	// Nothing was done: the vCon is still there, unchanged.
	if r := e.Do("GET", "/vcons/"+u, k.Token, nil); r.Status != 200 || string(r.Body) != string(body) {
		t.Errorf("after the refusals: %d %s", r.Status, r.Body)
	}
	// What a route takes still passes, and an empty query is no query.
	for _, path := range []string{"/vcons?limit=1", "/vcons?after=" + u + "&limit=5", "/vcons?", "/vcons/" + u + "?"} {
		if r := e.Do("GET", path, k.Token, nil); r.Status != 200 {
			t.Errorf("GET %s: %d %s", path, r.Status, r.Body)
		}
	}
	if r := e.Do("GET", "/health?", "", nil); r.Status != 200 {
		t.Errorf("GET /health?: %d %s", r.Status, r.Body)
	}
	// A key is checked first: without one, the answer is 401.
	if r := e.Do("GET", "/vcons?email=x", "", nil); r.Status != 401 {
		t.Errorf("without a key: %d %s", r.Status, r.Body)
	}

	// The refusals are in the tenant's audit log, without the parameters.
	audit := e.CLI("audit", "export", "--tenant", "acme")
	if n := strings.Count(audit, `"status":400`); n != 14 {
		t.Errorf("%d refusals audited, want 14:\n%s", n, audit)
	}
	for _, s := range []string{"email", "ada@example.com", "colour", "fields", "async", "purge"} {
		if strings.Contains(audit, s) {
			t.Errorf("the audit log holds %q:\n%s", s, audit)
		}
	}
	if !strings.Contains(audit, `"action":"read","target":"`+u+`","status":400`) {
		t.Errorf("the refused read is not audited with its uuid:\n%s", audit)
	}
}

// jsonString is s as the API's JSON writes it (quotes escaped, HTML not).
func jsonString(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

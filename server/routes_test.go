package server_test

import (
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestRouteErrors checks that what the mux answers on its own, an unknown
// path and a method a path does not take, has the JSON error shape of
// every other refusal, and that the routes' own 404s are unchanged.
func TestRouteErrors(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	reader := e.NewKey(tenant, "read")
	ops := e.OperatorKey()
	unknown := ids.NewRandom().String()

	for _, c := range []struct {
		name, method, path, token string
		status                    int
		allow, body               string
	}{
		{"unknown path", "GET", "/nope", "", 404, "", `{"error":"no such resource"}`},
		{"unknown path with a key", "GET", "/vcons/" + unknown + "/nope", reader.Token, 404, "", `{"error":"no such resource"}`},
		{"unknown admin path", "POST", "/admin/nope", ops.Token, 404, "", `{"error":"no such resource"}`},
		{"wrong method", "POST", "/health", "", 405, "GET, HEAD", `{"error":"this route does not take POST; it takes GET, HEAD"}`},
		{"wrong method on a route with a key", "DELETE", "/vcons", reader.Token, 405, "GET, HEAD, POST", `{"error":"this route does not take DELETE; it takes GET, HEAD, POST"}`},
		{"wrong method on an admin route", "POST", "/admin/tenants/" + tenant, ops.Token, 405, "DELETE, GET, HEAD", `{"error":"this route does not take POST; it takes DELETE, GET, HEAD"}`},
		{"unknown uuid", "GET", "/vcons/" + unknown, reader.Token, 404, "", `{"error":"no such vCon"}`},
		{"unknown uuid's versions", "GET", "/vcons/" + unknown + "/versions", reader.Token, 404, "", `{"error":"no such vCon"}`},
		{"unknown tenant", "GET", "/admin/tenants/" + unknown, ops.Token, 404, "", `{"error":"no such tenant"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.Do(c.method, c.path, c.token, nil)
			if r.Status != c.status || string(r.Body) != c.body+"\n" {
				t.Errorf("%s %s: %d %q, want %d %s", c.method, c.path, r.Status, r.Body, c.status, c.body)
			}
			if ct := r.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			if got := r.Header.Get("Allow"); got != c.allow {
				t.Errorf("Allow %q, want %q", got, c.allow)
			}
			if got := r.Header.Get("X-Content-Type-Options"); got != "" {
				t.Errorf("X-Content-Type-Options %q: the mux's text answer leaks through", got)
			}
		})
	}

	t.Run("HEAD", func(t *testing.T) {
		r := e.Do("HEAD", "/nope", "", nil)
		if r.Status != 404 || len(r.Body) != 0 || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("HEAD /nope: %d %q %v", r.Status, r.Body, r.Header)
		}
	})

	// Unmatched requests keep their one metrics label.
	m := e.Do("GET", "/metrics", ops.Token, nil)
	if want := `vcon_http_requests_total{route="other",code="4xx"} 7`; !strings.Contains(string(m.Body), want) {
		t.Errorf("metrics lack %s:\n%s", want, m.Body)
	}
}

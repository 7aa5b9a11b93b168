package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/server"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestOperatorScopes: each admin route and /metrics needs its operator
// scope. A key without it gets 403 naming the scope, recorded in the
// admin log; a key holding only that scope reaches the route; a key made
// without --scope holds every operator scope, and reaches every route.
func TestOperatorScopes(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	full := e.OperatorKey()
	only, lacking := map[string]testenv.Key{}, map[string]testenv.Key{}
	for _, sc := range catalog.OperatorScopes {
		only[sc] = e.OperatorKey(sc)
		lacking[sc] = e.OperatorKey(slices.DeleteFunc(slices.Clone(catalog.OperatorScopes), func(s string) bool { return s == sc })...)
	}
	fill := strings.NewReplacer("{id}", tenant, "{uuid}", ids.NewRandom().String())
	seen := map[string]bool{}
	for pattern, key := range server.RouteKeys() {
		kind, scope, _ := strings.Cut(key, " ")
		if kind != "operator" {
			continue
		}
		if !slices.Contains(catalog.OperatorScopes, scope) {
			t.Errorf("%s needs the operator scope %q, which no key can hold", pattern, scope)
			continue
		}
		seen[scope] = true
		method, path, _ := strings.Cut(pattern, " ")
		path = fill.Replace(path)
		r := e.Do(method, path, lacking[scope].Token, nil)
		want := `{"error":"this operator key lacks the ` + scope + ` scope this route needs"}` + "\n"
		if r.Status != 403 || string(r.Body) != want {
			t.Errorf("%s with a key lacking %s: %d %s, want 403 %s", pattern, scope, r.Status, r.Body, want)
		}
		for name, k := range map[string]testenv.Key{"only " + scope: only[scope], "every scope": full} {
			if r := e.Do(method, path, k.Token, nil); r.Status == 401 || r.Status == 403 {
				t.Errorf("%s with a key of %s: %d %s", pattern, name, r.Status, r.Body)
			}
		}
	}
	for _, sc := range catalog.OperatorScopes {
		if !seen[sc] {
			t.Errorf("no route needs the operator scope %s", sc)
		}
	}

	// The refusals are in the admin log, each naming the key, the scope
	// and the tenant of the path.
	refused := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(e.CLI("audit", "export", "--admin")), "\n") {
		var rec catalog.Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Action != "admin" {
			continue
		}
		sc, _ := strings.CutPrefix(rec.Target, "scope=")
		if rec.Status != 403 || rec.Actor != "key:"+lacking[sc].ID || rec.Label != "ops" {
			t.Errorf("admin log: %s", line)
		}
		if rec.Tenant != "" && rec.Tenant != tenant {
			t.Errorf("admin log: %s names another tenant", line)
		}
		if rec.Tenant == tenant {
			refused["{id}"]++
		}
		refused[sc]++
	}
	for pattern, key := range server.RouteKeys() {
		if kind, sc, _ := strings.Cut(key, " "); kind == "operator" {
			refused[sc]--
			if strings.Contains(pattern, "{id}") {
				refused["{id}"]--
			}
		}
	}
	for what, n := range refused {
		if n != 0 {
			t.Errorf("the admin log has %d refusals of %s more than the routes made", n, what)
		}
	}

	// key list shows what each key holds: an operator key made without
	// --scope every operator scope.
	for _, line := range strings.Split(strings.TrimSpace(e.CLI("key", "list")), "\n") {
		var k struct {
			ID     string
			Scopes []string
		}
		json.Unmarshal([]byte(line), &k)
		if k.ID == full.ID && !slices.Equal(k.Scopes, catalog.OperatorScopes) {
			t.Errorf("an operator key without --scope lists %v, want %v", k.Scopes, catalog.OperatorScopes)
		}
		if k.ID == only[catalog.ScopeMetrics].ID && !slices.Equal(k.Scopes, []string{"metrics"}) {
			t.Errorf("an operator key of --scope metrics lists %v", k.Scopes)
		}
	}
}

// TestOperatorScopeRefusals: key create refuses a tenant key's scope for
// an operator key, and a tenant with --operator; a repeated scope counts
// once.
func TestOperatorScopeRefusals(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	e.Tenant("acme")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--operator", "--scope", "read"}, `vcon-server: unknown scope "read": use metrics, tenants, holds, webhooks, log`},
		{[]string{"--operator", "--tenant", "acme"}, "vcon-server: an --operator key has no --tenant: it may use the admin API of every tenant"},
		{[]string{"--tenant", "acme", "--scope", "metrics"}, `vcon-server: unknown scope "metrics": use write, read, delete, audit, mcp`},
	} {
		_, errOut, code := e.TryCLI(append([]string{"key", "create", "--label", "x"}, c.args...)...)
		if code == 0 || strings.TrimSpace(errOut) != c.want {
			t.Errorf("key create %v: exit %d %q, want %q", c.args, code, errOut, c.want)
		}
	}
	var k struct{ Scopes []string }
	json.Unmarshal([]byte(e.CLI("key", "create", "--operator", "--scope", "metrics", "--scope", "log", "--scope", "metrics", "--label", "scraper")), &k)
	if !slices.Equal(k.Scopes, []string{"metrics", "log"}) {
		t.Errorf("scopes %v, want [metrics log]", k.Scopes)
	}
}

// TestAdminLogPages: GET /admin/log pages through the admin log, oldest
// first, in the lines audit export --admin prints, since and until
// bounding it as they bound the export; a bad parameter is refused.
func TestAdminLogPages(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	for i := 0; i < 12; i++ {
		e.Tenant(fmt.Sprintf("t%02d", i))
	}
	ops := e.OperatorKey(catalog.ScopeLog)
	want := e.CLI("audit", "export", "--admin")
	lines := strings.SplitAfter(want, "\n")
	lines = lines[:len(lines)-1]
	if len(lines) != 13 {
		t.Fatalf("the admin log has %d records, want 13:\n%s", len(lines), want)
	}

	page := func(query string) (string, string) {
		t.Helper()
		r := e.Do("GET", "/admin/log"+query, ops.Token, nil)
		if r.Status != 200 || r.Header.Get("Content-Type") != "application/x-ndjson" {
			t.Fatalf("GET /admin/log%s: %d %s %s", query, r.Status, r.Header.Get("Content-Type"), r.Body)
		}
		return string(r.Body), r.Header.Get("Next-After")
	}
	if got, next := page(""); got != want || next != "" {
		t.Errorf("one page: next %q,\n%s\nwant\n%s", next, got, want)
	}
	var got bytes.Buffer
	pages := 0
	for q := "?limit=5"; ; pages++ {
		body, next := page(q)
		got.WriteString(body)
		if next == "" {
			break
		}
		q = "?limit=5&after=" + next
	}
	if got.String() != want || pages != 2 {
		t.Errorf("%d pages of 5:\n%s\nwant\n%s", pages+1, got.String(), want)
	}

	var first, last catalog.Record
	json.Unmarshal([]byte(lines[3]), &first)
	json.Unmarshal([]byte(lines[9]), &last)
	since, until := first.Time.Format("2006-01-02T15:04:05.999999999Z07:00"), last.Time.Format("2006-01-02T15:04:05.999999999Z07:00")
	window := e.CLI("audit", "export", "--admin", "--since", since, "--until", until)
	if body, _ := page("?since=" + since + "&until=" + until); body != window || window == "" {
		t.Errorf("since %s until %s:\n%s\nwant\n%s", since, until, body, window)
	}
	if body, next := page("?limit=2&since=" + since + "&until=" + until); body != strings.Join(strings.SplitAfter(window, "\n")[:2], "") || next == "" {
		t.Errorf("a page of 2 of the window: %q, next %q", body, next)
	}

	for q, msg := range map[string]string{
		"?limit=0":                            "limit must be a number from 1 to 1000",
		"?limit=1001":                         "limit must be a number from 1 to 1000",
		"?after=nope":                         `after: "nope" is not a cursor of the log: send the one the last page named`,
		"?since=yesterday":                    `"yesterday" is not an RFC 3339 time such as 2026-11-05T00:00:00Z`,
		"?since=" + until + "&until=" + since: "since " + until + " is not before until " + since,
		"?tenant=acme":                        `unknown query parameter "tenant"; GET /admin/log takes since, until, limit, after`,
	} {
		r := e.Do("GET", "/admin/log"+q, ops.Token, nil)
		var got struct{ Error string }
		r.JSON(t, &got)
		if r.Status != 400 || got.Error != msg {
			t.Errorf("GET /admin/log%s: %d %q, want 400 %q", q, r.Status, got.Error, msg)
		}
	}
}

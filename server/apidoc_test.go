package server_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/server"
	"github.com/vcon-server/vcon-server/test/kit/openapitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// shared are the statuses docs/api.md gives every route below its
// summary, not in each row: 400 a query parameter or a repeated header,
// 401 and 403 the key, 429 a blocked address, 500, 503 the replica.
var shared = []int{400, 401, 403, 429, 500, 503}

// TestAPISummary holds docs/api.md's summary table to the routes: a row
// for every route and no other, each naming the key the route needs, and
// the statuses docs/openapi.json gives the route, but those the page
// gives every route at once, and no status the document does not give.
func TestAPISummary(t *testing.T) {
	f, err := os.Open(filepath.Join(testenv.ModuleRoot(t), "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `([A-Z]+ [^`?]+)(\\?[^`]*)?` \\| ([^|]+) \\| (.*) \\|$")
	status := regexp.MustCompile(`\b[1-5][0-9][0-9]\b`)
	rows := map[string][]string{}
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "## Summary":
			in = true
		case in && strings.HasPrefix(line, "## "):
			in = false
		case in:
			if m := row.FindStringSubmatch(line); m != nil {
				if rows[m[1]] != nil {
					t.Errorf("docs/api.md's summary has %s twice", m[1])
				}
				rows[m[1]] = []string{m[3], m[4]}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}

	d := openapitest.Load(t, openapitest.Path(t))
	for pattern, key := range server.RouteKeys() {
		r := rows[pattern]
		if r == nil {
			t.Errorf("docs/api.md's summary has no row for %s", pattern)
			continue
		}
		want := strings.Replace(key, " ", ": ", 1)
		if key == "" {
			want = "none"
		}
		if r[0] != want {
			t.Errorf("docs/api.md: %s needs key %q; the row says %q", pattern, want, r[0])
		}
		op := d.Ops[pattern]
		if op == nil {
			continue // TestOpenAPIRoutes says so
		}
		var given []int
		for _, s := range status.FindAllString(r[1], -1) {
			n, _ := strconv.Atoi(s)
			given = append(given, n)
			if !slices.Contains(op.Statuses, n) {
				t.Errorf("docs/api.md: %s answers %d, which docs/openapi.json does not give it", pattern, n)
			}
		}
		for _, n := range op.Statuses {
			if !slices.Contains(given, n) && !slices.Contains(shared, n) {
				t.Errorf("docs/api.md: %s may answer %d (docs/openapi.json); its row does not say so", pattern, n)
			}
		}
	}
	for pattern := range rows {
		if _, ok := server.RouteKeys()[pattern]; !ok {
			t.Errorf("docs/api.md's summary has %s; the server has no such route", pattern)
		}
	}
}

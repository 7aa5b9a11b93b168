// Package openapitest reads docs/openapi.json, the API described for
// machines, and drives a real server through every operation it documents:
// each status an operation documents is asked for with a request meant to
// get it (server/openapi_test.go holds the two to each other; the module in
// test/openapi checks the same exchanges against the document with an
// OpenAPI library).
package openapitest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// Op is one documented operation.
type Op struct {
	Method, Path string // "GET", "/vcons/{uuid}"
	// Key is what the operation's security requirement names first: ""
	// for none, a tenant key's scope, or "operator".
	Key string
	// Roles is everything the requirement names: a tenant key's scope,
	// or "operator" and an operator key's scope.
	Roles []string
	// Requirements is how many security requirements the operation lists
	// (0 for an open route; 1 otherwise), Scopes how many scopes they name.
	Requirements, Scopes int
	Statuses             []int    // documented, ascending
	Query                []string // query parameter names, as documented
	PathParams           []string // path parameter names
}

// Pattern is the operation as a route pattern: "GET /vcons/{uuid}". A
// path ending in {path} takes the rest of the path, one segment or more
// (the audit logs' tiles): the pattern's {path...}.
func (o *Op) Pattern() string {
	if p, ok := strings.CutSuffix(o.Path, "/"+restParam); ok {
		return o.Method + " " + p + "/{path...}"
	}
	return o.Method + " " + o.Path
}

// restParam is the path parameter that takes the rest of a path.
const restParam = "{path}"

// Doc is the document's operations by pattern.
type Doc struct {
	Ops map[string]*Op
}

// Path is docs/openapi.json in the module being tested.
func Path(t testing.TB) string { return filepath.Join(testenv.ModuleRoot(t), "docs", "openapi.json") }

// Load reads the document at path.
func Load(t testing.TB, path string) *Doc {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Parse(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return d
}

type param struct {
	Name string `json:"name"`
	In   string `json:"in"`
}

type operation struct {
	Security   []map[string][]string      `json:"security"`
	Parameters []param                    `json:"parameters"`
	Responses  map[string]json.RawMessage `json:"responses"`
}

// Parse reads the operations of an OpenAPI document. It reads only what
// the tests compare with the server; the OpenAPI library of test/openapi
// checks the rest.
func Parse(b []byte) (*Doc, error) {
	var raw struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	d := &Doc{Ops: map[string]*Op{}}
	for path, item := range raw.Paths {
		var shared []param
		if p, ok := item["parameters"]; ok {
			if err := json.Unmarshal(p, &shared); err != nil {
				return nil, err
			}
		}
		for method, body := range item {
			if method == "parameters" {
				continue
			}
			var o operation
			if err := json.Unmarshal(body, &o); err != nil {
				return nil, err
			}
			op := &Op{Method: strings.ToUpper(method), Path: path, Requirements: len(o.Security)}
			for _, req := range o.Security {
				for _, scopes := range req {
					op.Scopes += len(scopes)
					op.Roles = append(op.Roles, scopes...)
					if len(scopes) > 0 && op.Key == "" {
						op.Key = scopes[0]
					}
				}
			}
			for _, p := range append(slices.Clone(shared), o.Parameters...) {
				switch p.In {
				case "query":
					op.Query = append(op.Query, p.Name)
				case "path":
					op.PathParams = append(op.PathParams, p.Name)
				}
			}
			for code := range o.Responses {
				n, err := strconv.Atoi(code)
				if err != nil {
					return nil, fmt.Errorf("%s %s: response %q is not a status", method, path, code)
				}
				op.Statuses = append(op.Statuses, n)
			}
			sort.Ints(op.Statuses)
			d.Ops[op.Pattern()] = op
		}
	}
	return d, nil
}

// Match is the operation a request for method and path (no query) is
// for: a template's literal segments must equal the path's, and a
// "{name}" segment takes any one segment; the template with the most
// literal segments wins, as the server's mux decides. nil when none.
func (d *Doc) Match(method, path string) *Op {
	segs := strings.Split(path, "/")
	var best *Op
	bestLit := -1
	for _, op := range d.Ops {
		if op.Method != method {
			continue
		}
		tsegs := strings.Split(op.Path, "/")
		if n := len(tsegs); tsegs[n-1] == restParam && len(segs) > n {
			tsegs = append(tsegs, slices.Repeat([]string{restParam}, len(segs)-n)...)
		}
		if len(tsegs) != len(segs) {
			continue
		}
		lit, ok := 0, true
		for i, ts := range tsegs {
			if strings.HasPrefix(ts, "{") && strings.HasSuffix(ts, "}") {
				ok = ok && segs[i] != ""
				continue
			}
			ok = ok && ts == segs[i]
			lit++
		}
		if ok && lit > bestLit {
			best, bestLit = op, lit
		}
	}
	return best
}

// Sorted is the operations in pattern order.
func (d *Doc) Sorted() []*Op {
	out := make([]*Op, 0, len(d.Ops))
	for _, op := range d.Ops {
		out = append(out, op)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pattern() < out[j].Pattern() })
	return out
}

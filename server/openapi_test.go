package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/docs"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/search"
	"github.com/vcon-server/vcon-server/server"
	"github.com/vcon-server/vcon-server/test/kit/openapitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestOpenAPIServed: GET /openapi.json needs no key and answers the bytes
// of docs/openapi.json, which the binary embeds.
func TestOpenAPIServed(t *testing.T) {
	want, err := os.ReadFile(openapitest.Path(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(docs.OpenAPI, want) {
		t.Fatal("docs.OpenAPI is not docs/openapi.json")
	}
	e := testenv.New(t, testenv.Options{})
	r := e.Do("GET", "/openapi.json", "", nil)
	if r.Status != 200 || !bytes.Equal(r.Body, want) {
		t.Fatalf("GET /openapi.json: %d, %d bytes; want 200 and the %d bytes of docs/openapi.json", r.Status, len(r.Body), len(want))
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if !json.Valid(r.Body) {
		t.Error("the document is not JSON")
	}
}

// TestOpenAPIRoutes holds the document and the routes to each other: every
// pattern Handler registers is a documented operation needing the same
// key, every documented operation is a pattern Handler registers, and a
// request to each documented path and method reaches its route (never the
// mux's 404 or 405). The query parameters documented are the ones the
// routes read.
func TestOpenAPIRoutes(t *testing.T) {
	d := openapitest.Load(t, openapitest.Path(t))
	routes := server.RouteKeys()
	for pattern, key := range routes {
		op := d.Ops[pattern]
		if op == nil {
			t.Errorf("the server answers %s; docs/openapi.json does not document it", pattern)
			continue
		}
		want := 1
		if key == "" {
			want = 0
		}
		if got := strings.Join(op.Roles, " "); got != key || op.Requirements != want {
			t.Errorf("%s needs key %q; docs/openapi.json's security requirement names %q (%d requirements)",
				pattern, key, got, op.Requirements)
		}
	}
	for pattern := range d.Ops {
		if _, ok := routes[pattern]; !ok {
			t.Errorf("docs/openapi.json documents %s; the server has no such route", pattern)
		}
	}

	for _, op := range d.Sorted() {
		var want []string
		switch op.Pattern() {
		case "GET /vcons":
			want = append([]string{"limit", "after"}, search.Fields...)
		case "GET /erasures/{id}":
			want = []string{"after"}
		case "GET /admin/log":
			want = []string{"since", "until", "limit", "after"}
		case "GET /audit/log/proof", "GET /admin/log/proof":
			want = []string{"index"}
		}
		if !sameSet(op.Query, want) {
			t.Errorf("%s documents the query parameters %v; the route reads %v", op.Pattern(), op.Query, want)
		}
		var inPath []string
		for _, seg := range strings.Split(op.Path, "/") {
			if name, ok := strings.CutPrefix(seg, "{"); ok {
				inPath = append(inPath, strings.TrimSuffix(name, "}"))
			}
		}
		if !sameSet(op.PathParams, inPath) {
			t.Errorf("%s documents the path parameters %v; its path has %v", op.Pattern(), op.PathParams, inPath)
		}
	}

	// Reaching each documented operation without a key: its route answers
	// (401, or 200 for the open ones), not the mux. Each request comes
	// from an address of its own, so that no failure blocks the next.
	e := testenv.New(t, testenv.Options{})
	h := (&server.Server{Archive: e.Daemon.Archive, Cat: e.Daemon.Cat, Log: slog.New(slog.DiscardHandler)}).Handler()
	fill := strings.NewReplacer("{uuid}", ids.NewRandom().String(), "{id}", ids.NewRandom().String(), "{path}", "0/000")
	for i, op := range d.Sorted() {
		req := httptest.NewRequest(op.Method, "https://localhost"+fill.Replace(op.Path), nil)
		req.RemoteAddr = fmt.Sprintf("[2001:db8:%x::1]:443", i+1)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		want := 401
		if op.Key == "" {
			want = 200
		}
		if rec.Code != want {
			t.Errorf("%s %s without a key: %d %s, want %d", op.Method, req.URL.Path, rec.Code, rec.Body, want)
		}
	}
}

// TestOpenAPIStatuses drives a real server through every documented
// operation (test/kit/openapitest): every answer's status is one the
// document gives for its operation, every status the document gives is
// answered by some request (500 aside: no request of a client causes it),
// and every JSON refusal has the error shape.
func TestOpenAPIStatuses(t *testing.T) {
	d := openapitest.Load(t, openapitest.Path(t))
	seen := map[string]map[int]bool{}
	for _, x := range openapitest.Exchanges(t, d) {
		op := d.Match(x.Method, strings.SplitN(x.Target, "?", 2)[0])
		if op == nil {
			t.Errorf("%s: no documented operation", x)
			continue
		}
		if seen[op.Pattern()] == nil {
			seen[op.Pattern()] = map[int]bool{}
		}
		seen[op.Pattern()][x.Status] = true
		if !slices.Contains(op.Statuses, x.Status) {
			t.Errorf("%s: docs/openapi.json gives %s only %v", x, op.Pattern(), op.Statuses)
		}
		// /health's 503 is its own object, with the reasons; a 451 names
		// the purpose and the reason beside its error (server/purpose.go);
		// the MCP transport refuses with JSON-RPC errors (server/mcp.go).
		if op.Path == "/mcp" && x.Status >= 400 && jsonRPCError(x.RespBody) && x.RespHeader.Get("Content-Type") == "application/json" {
			continue
		}
		if x.Status >= 400 && op.Pattern() != "GET /health" {
			var e map[string]any
			fields := 1
			if x.Status == 451 {
				fields = 3
			}
			if err := json.Unmarshal(x.RespBody, &e); err != nil || len(e) != fields || e["error"] == nil {
				t.Errorf("%s: a refusal is {\"error\": \"...\"}", x)
			}
			if _, ok := e["error"].(string); !ok {
				t.Errorf("%s: the error is not a string", x)
			}
			if ct := x.RespHeader.Get("Content-Type"); ct != "application/json" {
				t.Errorf("%s: Content-Type %q", x, ct)
			}
		}
	}
	for _, op := range d.Sorted() {
		var never []int
		for _, status := range op.Statuses {
			if status != http.StatusInternalServerError && !seen[op.Pattern()][status] {
				never = append(never, status)
			}
		}
		if len(never) > 0 {
			t.Errorf("%s: docs/openapi.json gives %v, which no request got", op.Pattern(), never)
		}
	}
}

// jsonRPCError reports whether b is a JSON-RPC error with a message.
func jsonRPCError(b []byte) bool {
	var m struct {
		JSONRPC string `json:"jsonrpc"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	return json.Unmarshal(b, &m) == nil && m.JSONRPC == "2.0" && m.Error != nil && m.Error.Code != 0 && m.Error.Message != ""
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	sort.Strings(a)
	sort.Strings(b)
	return slices.Equal(a, b)
}

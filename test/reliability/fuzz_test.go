package reliability

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/server"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// FuzzHTTP sends arbitrary methods, paths, headers and bodies, with no
// key, a tenant key, an operator key or a wrong one, to the server's
// handler in-process (over a real catalog and data directory): it must
// never panic and never answer 5xx, which would mean client garbage
// reached a code path that treats it as the server's own failure.
// Requests that Go's HTTP server refuses before any handler runs
// (malformed methods, URLs or header fields) are skipped.
func FuzzHTTP(f *testing.F) {
	e := testenv.New(f, testenv.Options{MaxVconSize: "256KiB"})
	tenant := e.Tenant("fuzz")
	tokens := []string{"", e.NewKey(tenant, "write", "read", "delete").Token, e.OperatorKey().Token, "vcs_0000000000000000_wrong"}
	s := &server.Server{Archive: e.Daemon.Archive, Cat: e.Daemon.Cat, Log: slog.New(slog.DiscardHandler), MaxSize: 256 << 10}
	h := s.Handler()

	u := "0196a0f8-7b2c-7c3e-9d4a-1b2c3d4e5f60"
	vc := `{"vcon":"0.4.0","uuid":"` + u + `","parties":[{"tel":"+15555550100"}],"dialog":[]}`
	for _, seed := range []struct {
		method, path, hname, hvalue, body string
		token                             byte
	}{
		{"GET", "/health", "", "", "", 0},
		{"POST", "/vcons", "Content-Type", "application/vcon", vc, 1},
		{"PUT", "/vcons/" + u, "Content-Type", "application/vcon+json", vc, 1},
		{"GET", "/vcons/" + u, "If-None-Match", `"x"`, "", 1},
		{"GET", "/vcons/" + u + "/versions", "", "", "", 1},
		{"GET", "/vcons?after=" + u + "&limit=3", "", "", "", 1},
		{"DELETE", "/vcons/" + u, "", "", "", 1},
		{"POST", "/vcons", "Content-Encoding", "gzip", "\x1f\x8b\x08\x00garbage", 1},
		{"POST", "/admin/tenants", "Content-Type", "application/json", `{"name":"fz"}`, 2},
		{"PUT", "/admin/tenants/" + tenant + "/retention", "", "", `{"retention":"0d"}`, 2},
		{"PUT", "/admin/tenants/" + tenant + "/metadata", "", "", `{"metadata":"nope"}`, 2},
		{"PUT", "/admin/tenants/" + tenant + "/holds/" + u, "", "", "", 2},
		{"GET", "/admin/tenants/" + tenant + "/holds", "", "", "", 2},
		{"GET", "/metrics", "", "", "", 2},
		{"GET", "/vcons/../admin/tenants", "", "", "", 3},
		{"GET", "/vcons/%2e%2e%2fadmin", "Authorization", "Bearer x", "", 1},
		{"PATCH", "/vcons/" + u, "", "", "{}", 1},
		{"POST", "/vcons", "Content-Type", "application/vcon", strings.Repeat("[", 5000), 1},
	} {
		f.Add(seed.method, seed.path, seed.hname, seed.hvalue, []byte(seed.body), seed.token)
	}
	f.Fuzz(func(t *testing.T, method, path, hname, hvalue string, body []byte, token byte) {
		if !validToken(method) || (hname != "" && !validToken(hname)) || !validValue(hvalue) {
			return
		}
		target, err := url.ParseRequestURI(path)
		if err != nil || strings.ContainsAny(path, " \t\r\n") {
			return
		}
		req := &http.Request{
			Method: method, URL: target, RequestURI: path, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{}, Host: "localhost", RemoteAddr: fmt.Sprintf("192.0.2.%d:4444", token),
			Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
		}
		if tok := tokens[int(token)%len(tokens)]; tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		if hname != "" {
			req.Header.Add(hname, hvalue)
		}
		if len(body) > 0 && req.Header.Get("Content-Type") == "" {
			req.Header.Set("Content-Type", "application/vcon")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %q (%s: %q, %d body bytes, token %d): %d %s", method, path, hname, hvalue, len(body), token, w.Code, w.Body.String())
		}
	})
}

// validToken is the HTTP token grammar (RFC 9110 §5.6.2), which Go's
// server enforces for methods and header names before any handler runs.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

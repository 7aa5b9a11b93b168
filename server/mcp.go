package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vcon-server/vcon-server/catalog"
)

// The MCP endpoint (docs/mcp.md): POST, GET and DELETE /mcp speak MCP's
// Streamable HTTP transport through the official SDK, for a tenant key
// holding mcp and read. The SDK sees only these requests; every other
// route is served as if it were not there. The HTTP layer here refuses
// what it can before the SDK reads a byte (the endpoint off, a key's
// scopes, a foreign Origin, an oversized body or batch); each tool call
// is then decided and recorded as the matching route is (server/mcpcall.go).

// MCPSettings are [mcp]'s (docs/configuration.md). The zero value is off.
type MCPSettings struct {
	Enabled     bool
	Rate        int           // calls a minute per key; 0: 120
	CallTimeout time.Duration // 0: 10 seconds
	MaxResult   int64         // bytes of a vCon in one result; 0: 256 KiB
}

func (m MCPSettings) rate() int {
	if m.Rate <= 0 {
		return 120
	}
	return m.Rate
}

func (m MCPSettings) callTimeout() time.Duration {
	if m.CallTimeout <= 0 {
		return 10 * time.Second
	}
	return m.CallTimeout
}

func (m MCPSettings) maxResult() int64 {
	if m.MaxResult <= 0 {
		return 256 << 10
	}
	return m.MaxResult
}

// maxBatch bounds the messages of one JSON-RPC batch (only the protocol
// of 2025-03-26 has batches): each call in it is still counted against
// the key's rate.
const maxBatch = 16

// mcpIdle is how long a session no request uses is kept; it holds no vCon
// (docs/mcp.md), only the SDK's state of the conversation.
const mcpIdle = 30 * time.Minute

// JSON-RPC error codes of the HTTP layer's refusals.
const (
	codeInvalidRequest = -32600
	codeServerError    = -32000
)

// mcpKey is where the SDK keeps the request's key, in the token
// information it binds a session to: a session started by one key is
// refused to another (the SDK compares UserID).
const mcpKey = "key"

// newMCP is the SDK's handler of /mcp, one for the three routes.
func (s *Server) newMCP() http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "vcon-server", Title: "vcon-server archive (read only)", Version: "1"},
		&mcp.ServerOptions{Instructions: mcpInstructions})
	s.addTools(srv)
	srv.AddReceivingMiddleware(s.mcpCalls(newKeyRates(s.MCP.rate(), s.Limits.Now)))
	// The SDK's guard against DNS rebinding refuses a loopback connection
	// whose Host is not loopback: what a TLS pass-through proxy on the same
	// host sends. The Origin check and the bearer key are the guard here: a
	// rebound page's requests carry its own Origin, and no key.
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{SessionTimeout: mcpIdle, MaxRequestBodyBytes: maxJSONBody, DisableLocalhostProtection: true})
	// The key was found by authenticate; the SDK only carries it.
	verify := func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		k := keyOf(r)
		return &auth.TokenInfo{UserID: k.ID, Scopes: k.Scopes, Extra: map[string]any{mcpKey: k}}, nil
	}
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
}

// mcpInstructions tell an assistant what the server is, in its initialize
// answer.
const mcpInstructions = "A read-only archive of vCons (conversation records). search_vcons finds vCons by party " +
	"(tel, mailto, name) or subject words and pages with a cursor; get_vcon reads one; list_versions and " +
	"get_lawful_basis describe one; vcon_capabilities says what this endpoint can and cannot do. Every call is " +
	"recorded in the tenant's audit log, with the purpose it read for."

// mcpRoute serves /mcp: the HTTP layer's refusals, then the SDK.
func (s *Server) mcpRoute(h http.Handler) http.HandlerFunc {
	return s.authenticate(func(w http.ResponseWriter, r *http.Request) {
		k := keyOf(r)
		if !s.MCP.Enabled {
			writeError(w, http.StatusNotFound, "the MCP endpoint is off on this server; an operator turns it on with [mcp] enabled = true (docs/mcp.md)")
			return
		}
		if k.Operator() {
			writeError(w, http.StatusForbidden, "an operator key cannot use the vCon API; use a tenant key")
			return
		}
		for _, scope := range []string{catalog.ScopeMCP, "read"} {
			if !k.Has(scope) {
				s.Metrics.mcpRefused(refusedScope)
				s.audit(r, k, "mcp", "", http.StatusForbidden)
				writeError(w, http.StatusForbidden, "this key lacks the "+scope+" scope; the MCP endpoint needs a key with mcp and read (vcon-server key create --scope mcp --scope read)")
				return
			}
		}
		if msg := badQuery(r); msg != "" {
			writeError(w, http.StatusBadRequest, msg)
			return
		}
		if !sameOrigin(r) {
			// The MCP specification asks a Streamable HTTP server to refuse
			// an Origin not its own with 403: a web page's script must not
			// reach the archive through a browser that holds a key.
			s.Metrics.mcpRefused(refusedOrigin)
			s.audit(r, k, "mcp", "", http.StatusForbidden)
			writeRPCError(w, http.StatusForbidden, codeInvalidRequest, "the Origin "+strconv.Quote(clip(r.Header.Get("Origin"), 64))+" is not this server's; MCP clients send none, or this server's own")
			return
		}
		if !s.boundedBatch(w, r) {
			return
		}
		if r.Method == http.MethodGet {
			var done func()
			r, done = s.streams.add(r)
			defer done()
		}
		h.ServeHTTP(&rpcErrorWriter{ResponseWriter: w}, r)
	})
}

// sameOrigin reports whether r sends no Origin, or this server's own.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Values("Origin")
	switch {
	case len(o) == 0:
		return true
	case len(o) > 1:
		return false
	}
	return strings.EqualFold(o[0], "https://"+r.Host)
}

// boundedBatch reads a POST's body, within the JSON body limit, and
// refuses a batch of more than maxBatch messages before the SDK parses
// it; the body is then handed on whole.
func (s *Server) boundedBatch(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		return true
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
	if err != nil {
		w.Header().Set("Connection", "close")
		writeRPCError(w, http.StatusRequestEntityTooLarge, codeInvalidRequest, "the request body is over "+strconv.Itoa(maxJSONBody)+" bytes; send smaller arguments, one message at a time")
		return false
	}
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(t, &batch) == nil && len(batch) > maxBatch {
			s.Metrics.mcpRefused(refusedBatch)
			writeRPCError(w, http.StatusBadRequest, codeInvalidRequest, "a batch holds at most "+strconv.Itoa(maxBatch)+" messages, not "+strconv.Itoa(len(batch))+"; send fewer at a time")
			return false
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return true
}

// streamSet is the event streams open on GET /mcp: a client holds one
// per session for as long as it likes, and a stopping server must not
// wait for them (CloseStreams).
type streamSet struct {
	mu     sync.Mutex
	next   int
	open   map[int]context.CancelFunc
	closed bool
}

// add gives r a context that CloseStreams ends; done forgets it.
func (ss *streamSet) add(r *http.Request) (*http.Request, func()) {
	ctx, cancel := context.WithCancel(r.Context())
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		cancel()
		return r.WithContext(ctx), func() {}
	}
	if ss.open == nil {
		ss.open = map[int]context.CancelFunc{}
	}
	id := ss.next
	ss.next++
	ss.open[id] = cancel
	return r.WithContext(ctx), func() {
		ss.mu.Lock()
		delete(ss.open, id)
		ss.mu.Unlock()
		cancel()
	}
}

// CloseStreams ends the MCP sessions' event streams, and every one opened
// after: the server is stopping (http.Server.RegisterOnShutdown), and a
// client reconnects to the next one.
func (s *Server) CloseStreams() {
	ss := &s.streams
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.closed = true
	for _, cancel := range ss.open {
		cancel()
	}
}

// writeRPCError answers a JSON-RPC error that answers no request (id null).
func writeRPCError(w http.ResponseWriter, status, code int, msg string) {
	writeJSON(w, status, map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
}

// clip cuts s to at most n bytes, for a refusal that repeats a client's text.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}

// rpcErrorWriter gives the SDK's text refusals (an unknown or another
// key's session, a bad Accept, a malformed message) the shape of a
// JSON-RPC error, so that an MCP client reads why; the status stays.
type rpcErrorWriter struct {
	http.ResponseWriter
	status   int
	replaced bool
}

func (w *rpcErrorWriter) WriteHeader(status int) {
	if status >= 400 && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.status, w.replaced = status, true
		w.Header().Del("X-Content-Type-Options")
		return // answered with the text, in Write
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *rpcErrorWriter) Write(b []byte) (int, error) {
	if !w.replaced {
		return w.ResponseWriter.Write(b)
	}
	if w.status != 0 {
		msg := strings.TrimSpace(string(b))
		if msg == "session user mismatch" {
			msg = "this session was started by another key; start one of your own with initialize"
		} else if msg == "session not found" {
			msg = "no such session (it ended, or was never started); start one with initialize"
		}
		writeRPCError(w.ResponseWriter, w.status, codeInvalidRequest, msg)
		w.status = 0
	}
	return len(b), nil
}

// Flush lets the SDK's event stream through the writers below (the
// metrics' and the guard's, which unwrap).
func (w *rpcErrorWriter) Flush() {
	if !w.replaced {
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

func (w *rpcErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

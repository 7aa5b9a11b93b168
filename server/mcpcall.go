package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vcon-server/vcon-server/catalog"
)

// A call to the MCP endpoint (docs/mcp.md, "What is recorded"): a tool
// call or a resource read, counted against the key's rate, decided for
// the purpose the request names (resolvePurpose, as on every route),
// bounded in time, and recorded in the tenant's audit log whatever its
// outcome, with the uuids it returned.

// mcpCall is one call in progress, in its context: what the tool's
// handler learns of its caller and tells the record.
type mcpCall struct {
	key    catalog.Key
	action string        // the record's action: mcp_call and what was called
	req    *http.Request // the call as a request: its headers, its purpose note
	status int           // the HTTP status the same read would answer; 0: not set
	target string        // the record's target: a uuid, or uuids=...
}

type mcpCallCtx struct{}

func callOf(ctx context.Context) *mcpCall { return ctx.Value(mcpCallCtx{}).(*mcpCall) }

// refuse notes status and says msg as the tool's error.
func (c *mcpCall) refuse(status int, msg string) (*mcp.CallToolResult, any, error) {
	c.status = status
	return toolError(msg), nil, nil
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// mcpTools are the tools a record or a metric may name; a call of any
// other name is recorded as "other", never as the caller's text.
var mcpTools = []string{"search_vcons", "get_vcon", "list_versions", "get_lawful_basis", "vcon_capabilities"}

// callAction is the record's action of a method, and whether the method
// is a call: initialize counts against the rate (a session costs the
// server memory) but has no record; listing tools and the like neither.
func callAction(method string, req mcp.Request) (action string, counted bool) {
	switch method {
	case "initialize":
		return "", true
	case "resources/read":
		return "mcp_call resource=vcon", true
	case "tools/call":
		name := "other"
		if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok {
			for _, t := range mcpTools {
				if p.Name == t {
					name = t
				}
			}
		}
		return "mcp_call tool=" + name, true
	}
	return "", false
}

// mcpCalls is the middleware every message to the endpoint passes.
func (s *Server) mcpCalls(rates *keyRates) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			action, counted := callAction(method, req)
			if !counted {
				return next(ctx, method, req)
			}
			k, ok := mcpKeyOf(req)
			if !ok {
				return nil, &jsonrpc.Error{Code: codeServerError, Message: "this call came without a key; send Authorization: Bearer <token> with every request"}
			}
			ctx, cancel := context.WithTimeout(ctx, s.MCP.callTimeout())
			defer cancel()
			c := &mcpCall{key: k, action: action}
			ctx = context.WithValue(ctx, mcpCallCtx{}, c)
			c.req = callRequest(ctx, req)
			if !rates.allow(k.ID, 1) {
				s.Metrics.mcpRefused(refusedRate)
				if action != "" {
					s.finish(c, http.StatusTooManyRequests)
				}
				return nil, &jsonrpc.Error{Code: codeServerError, Message: "this key made more than " + strconv.Itoa(s.MCP.rate()) +
					" calls in the last minute ([mcp] rate); wait a few seconds and call again"}
			}
			if action == "" {
				return next(ctx, method, req)
			}
			if enforces(k) {
				p, status, msg := resolvePurpose(k, c.req)
				if status != 0 {
					s.Metrics.mcpRefused(refusedPurpose)
					s.finish(c, status)
					if method == "tools/call" {
						return toolError(msg), nil
					}
					return nil, &jsonrpc.Error{Code: codeInvalidRequest, Message: msg}
				}
				c.req = withPurpose(c.req, &purposeNote{purpose: p})
			}
			res, err := next(c.req.Context(), method, req)
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				c.status = http.StatusGatewayTimeout
				msg := "the call took longer than " + strconv.Itoa(int(s.MCP.callTimeout().Seconds())) + " seconds ([mcp] call_timeout); narrow it, or try again"
				if method == "tools/call" {
					res, err = toolError(msg), nil
				} else {
					res, err = nil, &jsonrpc.Error{Code: codeServerError, Message: msg}
				}
			}
			if c.status == 0 {
				c.status = http.StatusOK
				if tr, ok := res.(*mcp.CallToolResult); err != nil || ok && tr.IsError {
					c.status = http.StatusBadRequest // the arguments, refused by their schema
				}
			}
			s.finish(c, c.status)
			return res, err
		}
	}
}

// finish records c and counts it.
func (s *Server) finish(c *mcpCall, status int) {
	s.audit(c.req, c.key, c.action, c.target, status)
	s.Metrics.mcpCalled(baseTool(c.action), status)
	switch status {
	case http.StatusUnavailableForLegalReasons:
		s.Metrics.mcpRefused(refusedLawful)
	case http.StatusGatewayTimeout:
		s.Metrics.mcpRefused(refusedTimeout)
	}
}

// mcpKeyOf is the key the request's HTTP layer authenticated (newMCP).
func mcpKeyOf(req mcp.Request) (catalog.Key, bool) {
	ex := req.GetExtra()
	if ex == nil || ex.TokenInfo == nil {
		return catalog.Key{}, false
	}
	k, ok := ex.TokenInfo.Extra[mcpKey].(catalog.Key)
	return k, ok
}

// callRequest is the call as a request to the routes' helpers: the
// headers of the POST that carried it (Vcon-Purpose), in ctx.
func callRequest(ctx context.Context, req mcp.Request) *http.Request {
	r, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/mcp", nil)
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		r.Header = ex.Header.Clone()
	}
	r.Pattern = "POST /mcp"
	return r
}

// keyRates is a token bucket per key: rate calls a minute, as many at
// once. Its memory is bounded as the authentication limiter's is.
type keyRates struct {
	rate float64
	now  func() time.Time

	mu   sync.Mutex
	keys map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newKeyRates(rate int, now func() time.Time) *keyRates {
	if now == nil {
		now = time.Now
	}
	return &keyRates{rate: float64(rate), now: now, keys: map[string]*bucket{}}
}

// allow takes n tokens from key's bucket, and reports whether it held them.
func (k *keyRates) allow(key string, n float64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	b := k.keys[key]
	if b == nil {
		if len(k.keys) >= maxTracked {
			k.prune(now)
		}
		b = &bucket{tokens: k.rate, at: now}
		k.keys[key] = b
	}
	b.tokens = min(k.rate, b.tokens+now.Sub(b.at).Minutes()*k.rate)
	b.at = now
	if b.tokens < n {
		return false
	}
	b.tokens -= n
	return true
}

// prune forgets the keys whose buckets have filled again; if every one is
// still in use, it forgets them all rather than grow.
func (k *keyRates) prune(now time.Time) {
	for id, b := range k.keys {
		if now.Sub(b.at) >= time.Minute {
			delete(k.keys, id)
		}
	}
	if len(k.keys) >= maxTracked {
		clear(k.keys)
	}
}

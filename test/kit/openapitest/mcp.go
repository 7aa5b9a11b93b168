package openapitest

import (
	"context"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
)

// mcpExchanges drives /mcp (docs/mcp.md) through its answers: a session
// started, used and ended by its key, and the transport's refusals.
func mcpExchanges(r *runner, assistant, other string) {
	js := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}
	v := []string{"Mcp-Protocol-Version", "2025-06-18"}
	msg := func(id int, method, params string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":` + string(rune('0'+id)) + `,"method":"` + method + `","params":` + params + `}`)
	}
	x := r.expect(200, "initialize", true, "POST", "/mcp", assistant,
		msg(1, "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"openapi","version":"1"}}`), js...)
	session := x.RespHeader.Get("Mcp-Session-Id")
	if session == "" {
		r.t.Fatalf("%s: no Mcp-Session-Id", x)
	}
	in := append(append([]string{"Mcp-Session-Id", session}, js...), v...)
	r.expect(202, "initialized", true, "POST", "/mcp", assistant, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), in...)
	r.expect(200, "tools/list", true, "POST", "/mcp", assistant, msg(2, "tools/list", `{}`), in...)
	r.expect(200, "a tool call", true, "POST", "/mcp", assistant, msg(3, "tools/call", `{"name":"get_vcon","arguments":{"uuid":"`+ids.NewRandom().String()+`"}}`), in...)
	r.expect(400, "an unknown method", true, "POST", "/mcp", assistant, msg(4, "vcons/delete", `{}`), in...)
	batch := "[" + strings.TrimSuffix(strings.Repeat(string(msg(5, "tools/list", `{}`))+",", 17), ",") + "]"
	r.expect(400, "a batch of 17", false, "POST", "/mcp", assistant, []byte(batch), append([]string{"Mcp-Session-Id", session}, js...)...)
	r.expect(403, "a foreign Origin", true, "POST", "/mcp", assistant, msg(6, "tools/list", `{}`), append(in, "Origin", "https://evil.example")...)
	r.expect(403, "another key's session", true, "POST", "/mcp", other, msg(7, "tools/list", `{}`), in...)
	r.expect(404, "no such session", true, "POST", "/mcp", assistant, msg(8, "tools/list", `{}`), append(append([]string{"Mcp-Session-Id", "gone"}, js...), v...)...)
	r.expect(413, "a body over 64 KiB", false, "POST", "/mcp", assistant, []byte(`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"x":"`+strings.Repeat("a", 70<<10)+`"}}`), in...)
	r.expect(415, "not JSON", false, "POST", "/mcp", assistant, msg(9, "tools/list", `{}`), append([]string{"Content-Type", "text/plain", "Mcp-Session-Id", session}, v...)...)

	r.stream("the session's stream", assistant, "Mcp-Session-Id", session, "Accept", "text/event-stream", "Mcp-Protocol-Version", "2025-06-18")
	r.expect(400, "a stream without Accept", false, "GET", "/mcp", assistant, nil, "Mcp-Session-Id", session)
	r.expect(403, "another key's stream", true, "GET", "/mcp", other, nil, "Mcp-Session-Id", session, "Accept", "text/event-stream")
	r.expect(404, "the stream of no session", true, "GET", "/mcp", assistant, nil, "Mcp-Session-Id", "gone", "Accept", "text/event-stream")

	r.expect(400, "an end without a session", false, "DELETE", "/mcp", assistant, nil)
	r.expect(403, "another key's end", true, "DELETE", "/mcp", other, nil, "Mcp-Session-Id", session)
	r.expect(204, "the end of the session", true, "DELETE", "/mcp", assistant, nil, "Mcp-Session-Id", session)
	r.expect(404, "the end of a session ended", true, "DELETE", "/mcp", assistant, nil, "Mcp-Session-Id", session)
}

// stream opens GET /mcp, an event stream that stays open, and records
// what came within a moment.
func (r *runner) stream(name, token string, headers ...string) {
	r.t.Helper()
	x := Exchange{Name: name, Method: "GET", Target: "/mcp", Header: map[string][]string{"Authorization": {"Bearer " + token}}, Valid: true}
	for i := 0; i+1 < len(headers); i += 2 {
		x.Header.Add(headers[i], headers[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req := x.Request().WithContext(ctx)
	req.RemoteAddr = r.nextAddr()
	rec := httptest.NewRecorder()
	r.h.ServeHTTP(rec, req)
	res := rec.Result()
	x.Status, x.RespHeader, x.RespBody = res.StatusCode, res.Header, rec.Body.Bytes()
	if x.Status != 200 {
		r.t.Errorf("%s, want 200", x)
	}
	r.out = append(r.out, x)
}

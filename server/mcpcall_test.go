package server

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/metrics"
)

// TestMCPCallTimeout: a call still running at [mcp] call_timeout is
// answered with the tool's error naming the setting, and counted as a
// refusal; the handler's context ends with it.
func TestMCPCallTimeout(t *testing.T) {
	s := &Server{Log: slog.New(slog.DiscardHandler), Metrics: NewMetrics(metrics.NewRegistry()),
		MCP: MCPSettings{Enabled: true, CallTimeout: 50 * time.Millisecond}}
	slow := func(ctx context.Context, _ string, _ mcp.Request) (mcp.Result, error) {
		<-ctx.Done()
		return &mcp.CallToolResult{}, nil
	}
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "get_vcon"},
		Extra: &mcp.RequestExtra{TokenInfo: &auth.TokenInfo{Extra: map[string]any{mcpKey: catalog.Key{ID: "k"}}}}}
	start := time.Now()
	res, err := s.mcpCalls(newKeyRates(10, nil))(slow)(context.Background(), "tools/call", req)
	tr, ok := res.(*mcp.CallToolResult)
	if err != nil || !ok || !tr.IsError || !strings.Contains(tr.Content[0].(*mcp.TextContent).Text, "call_timeout") {
		t.Fatalf("a slow call: %v %+v", err, res)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the call took %v", d)
	}
	if n := s.Metrics.mcpRefuse.Value(refusedTimeout); n != 1 {
		t.Errorf("timeouts counted: %v", n)
	}
	if n := s.Metrics.mcpCalls.Value("get_vcon", "error"); n != 1 {
		t.Errorf("get_vcon errors counted: %v", n)
	}
}

// TestKeyRates: a key's bucket holds rate calls, refills at rate a
// minute, and is its own.
func TestKeyRates(t *testing.T) {
	now := time.Unix(1e9, 0)
	k := newKeyRates(3, func() time.Time { return now })
	for i := range 3 {
		if !k.allow("a", 1) {
			t.Fatalf("call %d refused", i)
		}
	}
	if k.allow("a", 1) {
		t.Error("a fourth call within the minute")
	}
	if !k.allow("b", 1) {
		t.Error("another key's call refused")
	}
	now = now.Add(20 * time.Second) // a third of a minute: one call back
	if !k.allow("a", 1) || k.allow("a", 1) {
		t.Error("the bucket did not refill by one")
	}
}

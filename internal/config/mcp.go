package config

import "time"

// Bounds of [mcp] (docs/mcp.md): a call may take no longer than the
// listener's write timeout, and a result must hold at least a small vCon
// and at most what one JSON-RPC answer sensibly carries.
const (
	maxMCPRate        = 100000
	maxMCPCallTimeout = 600
	minMCPResult      = 4 << 10
	maxMCPResult      = 16 << 20
)

// mcp reads [mcp].
func (b *builder) mcp(raw *rawConfig) {
	r, c := raw.MCP, &b.cfg.MCP
	if r.Enabled != nil {
		c.Enabled = b.boolean("mcp.enabled", r.Enabled)
	}
	if r.Rate != nil {
		n, ok := r.Rate.(int64)
		switch {
		case !ok:
			b.fail("mcp.rate must be a whole number of calls a minute, not %s", show(r.Rate))
		case n < 1 || n > maxMCPRate:
			b.fail("mcp.rate must be from 1 to %d calls a minute, not %d", maxMCPRate, n)
		default:
			c.Rate = int(n)
		}
	}
	if r.CallTimeout != nil {
		c.CallTimeout = b.seconds("mcp.call_timeout", r.CallTimeout, false)
		if b.err == nil && c.CallTimeout > maxMCPCallTimeout*time.Second {
			b.fail("mcp.call_timeout must be at most %d seconds, not %d", maxMCPCallTimeout, int64(c.CallTimeout/time.Second))
		}
	}
	if r.MaxResult != nil {
		c.MaxResult = b.size("mcp.max_result", r.MaxResult)
		if b.err == nil && (c.MaxResult < minMCPResult || c.MaxResult > maxMCPResult) {
			b.fail("mcp.max_result must be from 4KiB to 16MiB, not %d bytes", c.MaxResult)
		}
	}
}

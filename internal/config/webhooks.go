package config

import (
	"net/netip"
)

// Webhooks is the [webhooks] table: the addresses deliveries may go to
// besides public ones (docs/webhooks.md, "Where events may go").
type Webhooks struct {
	Allow []netip.Prefix // an address alone is a prefix of its full length
}

// webhooks reads [webhooks].
func (b *builder) webhooks(raw *rawConfig) {
	v := raw.Webhooks.Allow
	if v == nil {
		return
	}
	const rule = `an array of IP addresses and CIDR ranges, such as ["127.0.0.1", "10.0.0.0/8"]`
	list, ok := v.([]any)
	if !ok {
		b.fail("webhooks.allow must be %s, not %s", rule, show(v))
		return
	}
	for i, item := range list {
		s, ok := item.(string)
		if !ok {
			b.fail("webhooks.allow[%d] must be a string (%s), not %s", i, rule, show(item))
			return
		}
		p, err := allowEntry(s)
		if err != "" {
			b.fail("webhooks.allow[%d] %q %s", i, s, err)
			return
		}
		b.cfg.Webhooks.Allow = append(b.cfg.Webhooks.Allow, p)
	}
}

// allowEntry reads one address or range of webhooks.allow, or says what is
// wrong with it.
func allowEntry(s string) (netip.Prefix, string) {
	if ip, err := netip.ParseAddr(s); err == nil {
		if ip.Zone() != "" {
			return netip.Prefix{}, "has a zone; write the address alone"
		}
		return netip.PrefixFrom(ip, ip.BitLen()), ""
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, `is not an IP address nor a CIDR range such as "10.0.0.0/8"`
	}
	if p.Masked() != p {
		return netip.Prefix{}, "has bits set past its length; write " + p.Masked().String()
	}
	return p, ""
}

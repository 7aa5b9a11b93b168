package config

import (
	"net/netip"
	"reflect"
	"testing"
)

// TestWebhooksAllow: addresses and ranges read as prefixes; every wrong
// value refused with the key, its place and the value.
func TestWebhooksAllow(t *testing.T) {
	c, err := Parse([]byte("[webhooks]\nallow = [\"127.0.0.1\", \"10.0.0.0/8\", \"::1\", \"fd00::/8\"]\n"), path)
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("fd00::/8")}
	if !reflect.DeepEqual(c.Webhooks.Allow, want) {
		t.Errorf("allow %v, want %v", c.Webhooks.Allow, want)
	}
	if c, err := Parse([]byte("[webhooks]\n"), path); err != nil || c.Webhooks.Allow != nil {
		t.Errorf("an empty [webhooks]: %v %v", c, err)
	}
	for file, want := range map[string]string{
		"[webhooks]\nallow = \"127.0.0.1\"\n":        `configuration: webhooks.allow must be an array of IP addresses and CIDR ranges, such as ["127.0.0.1", "10.0.0.0/8"], not "127.0.0.1"`,
		"[webhooks]\nallow = [1]\n":                  `configuration: webhooks.allow[0] must be a string (an array of IP addresses and CIDR ranges, such as ["127.0.0.1", "10.0.0.0/8"]), not 1`,
		"[webhooks]\nallow = [\"::1\", \"local\"]\n": `configuration: webhooks.allow[1] "local" is not an IP address nor a CIDR range such as "10.0.0.0/8"`,
		"[webhooks]\nallow = [\"10.0.0.1/8\"]\n":     `configuration: webhooks.allow[0] "10.0.0.1/8" has bits set past its length; write 10.0.0.0/8`,
		"[webhooks]\nallow = [\"10.0.0.0/33\"]\n":    `configuration: webhooks.allow[0] "10.0.0.0/33" is not an IP address nor a CIDR range such as "10.0.0.0/8"`,
		"[webhooks]\nallow = [\"fe80::1%eth0\"]\n":   `configuration: webhooks.allow[0] "fe80::1%eth0" has a zone; write the address alone`,
		"[webhooks]\ndeny = []\n":                    `configuration: unknown key webhooks.deny`,
		"webhooks = 1\n":                             `configuration: webhooks must be a table, not 1`,
	} {
		if _, err := Parse([]byte(file), path); err == nil || err.Error() != want {
			t.Errorf("%s\ngot  %v\nwant %s", file, err, want)
		}
	}
}

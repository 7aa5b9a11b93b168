package kms

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

// The canonical encoding is sorted, compact, and tells distinct contexts
// apart; what JSON could not carry faithfully is refused.
func TestCanonical(t *testing.T) {
	for _, c := range []struct {
		in   Context
		want string
	}{
		{nil, `{}`},
		{Context{"purpose": "master key", "catalog": "0f3a9c"}, `{"catalog":"0f3a9c","purpose":"master key"}`},
		{Context{"b": "", "a": `"quoted" \ <&> é` + "\n"}, `{"a":"\"quoted\" \\ <&> é\n","b":""}`},
		// Pairs whose naive joining would collide stay apart.
		{Context{"a": `","b":"`}, `{"a":"\",\"b\":\""}`},
	} {
		got, err := canonical(c.in)
		if err != nil || string(got) != c.want {
			t.Errorf("canonical(%q) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []Context{{"": "v"}, {"k": "\xff"}, {"\xfe": "v"}} {
		if got, err := canonical(bad); err == nil {
			t.Errorf("canonical(%q) = %s, want an error", bad, got)
		}
	}
}

// Each HTTP provider's client takes no proxy from the environment,
// follows no redirect, and bounds the answer's headers; none is
// http.DefaultClient.
func TestHTTPClientBounds(t *testing.T) {
	c, err := newHTTPClient("")
	if err != nil {
		t.Fatal(err)
	}
	tr := c.Transport.(*http.Transport)
	if tr.Proxy != nil {
		t.Error("the transport takes a proxy")
	}
	if tr.MaxResponseHeaderBytes != 16<<10 {
		t.Errorf("MaxResponseHeaderBytes = %d, want 16 KiB", tr.MaxResponseHeaderBytes)
	}
	if c.CheckRedirect == nil || !errors.Is(c.CheckRedirect(nil, nil), http.ErrUseLastResponse) {
		t.Error("CheckRedirect does not stop at the first answer")
	}
	if c == http.DefaultClient || tr == http.DefaultTransport {
		t.Error("the default client or transport")
	}
}

// scrub keeps a KMS's message readable and bounded, and drops it when it
// repeats a secret in any of the forms a server echoes.
func TestScrub(t *testing.T) {
	secret := []byte("0123456789abcdef")
	if got := scrub("key\x00 is\n\tdisabled", secret); got != "key is disabled" {
		t.Errorf("scrub = %q", got)
	}
	for _, echo := range []string{"raw 0123456789abcdef", "b64 MDEyMzQ1Njc4OWFiY2RlZg==", "hex 30313233343536373839616263646566", "HEX 30313233343536373839616263646566"} {
		if got := scrub(echo, secret); strings.Contains(got, echo[4:]) {
			t.Errorf("scrub(%q) = %q: the secret is kept", echo, got)
		}
	}
	if got := scrub(strings.Repeat("é", 1000)); len(got) > maxMessage+3 || !strings.HasSuffix(got, "...") {
		t.Errorf("scrub of 2000 bytes = %d bytes", len(got))
	}
}

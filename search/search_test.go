package search

import (
	"testing"

	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/vcon"
)

func TestNormalize(t *testing.T) {
	for _, c := range []struct{ field, in, want string }{
		{"tel", "+1 555 555 0101", "15555550101"},
		{"tel", "+15555550101", "15555550101"},
		{"tel", "tel:+15555550101", "15555550101"},
		{"tel", "tel:+1-555-555-0101;ext=7", "15555550101"},
		{"mailto", "mailto:Alice@Example.COM", "alice@example.com"},
		{"mailto", " bob@example.com ", "bob@example.com"},
		{"name", "  Ada   LOVELACE ", "ada lovelace"},
		{"tel", "no digits", ""},
	} {
		if got := Normalize(c.field, c.in); got != c.want {
			t.Errorf("Normalize(%s, %q) = %q, want %q", c.field, c.in, got, c.want)
		}
	}
}

func TestTokens(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	subject := "Billing dispute, March"
	m := &vcon.Meta{Form: vocab.FormUnsigned, Subject: &subject, Parties: []vcon.Party{{Tel: "+15555550101", Name: "Ada"}, {Tel: "tel:+1 555 555 0101", Mailto: "mailto:ada@example.com"}}}
	if n := len(Tokens(key, m, vocab.SearchParties)); n != 3 {
		t.Fatalf("parties: %d tokens, want 3 (one tel, one name, one mailto)", n)
	}
	if n := len(Tokens(key, m, vocab.SearchPartiesSubject)); n != 6 {
		t.Fatalf("parties+subject: %d tokens, want 6", n)
	}
	m.Form = vocab.FormEncrypted
	if n := len(Tokens(key, m, vocab.SearchPartiesSubject)); n != 0 {
		t.Fatalf("encrypted: %d tokens", n)
	}
	a, _ := Query(key, "tel", "+1 555 555 0101")
	b, _ := Query([]byte("another tenant's key 0123456789ab"), "tel", "+1 555 555 0101")
	if a == b {
		t.Fatal("two tenants' keys give one token")
	}
	if x, _ := Query(key, "name", "15555550101"); x == a {
		t.Fatal("a name and a tel with the same text share a token")
	}
}

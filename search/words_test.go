package search

import (
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/vcon"
)

// TestFilter: a subject filter looks up one token per distinct word, the
// very tokens the indexer made of the subject's words; other filters one.
func TestFilter(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	if got := strings.Join(Words(" Billing dispute,March (re-sent) CAFÉ "), "|"); got != "billing|dispute|march|re|sent|café" {
		t.Errorf("Words: %s", got)
	}
	subject := "Billing dispute, March"
	m := &vcon.Meta{Form: vocab.FormUnsigned, Subject: &subject}
	indexed := map[Token]bool{}
	for _, tok := range Tokens(key, m, vocab.SearchPartiesSubject) {
		indexed[tok] = true
	}
	ts, ok := Filter(key, "subject", "MARCH; billing billing")
	if !ok || len(ts) != 2 || !indexed[ts[0]] || !indexed[ts[1]] {
		t.Errorf("subject filter: %v %v, indexed %v", ts, ok, indexed)
	}
	if ts, ok := Filter(key, "subject", "billing-dispute"); !ok || len(ts) != 2 {
		t.Errorf("a hyphen splits words as the indexer does: %v", ts)
	}
	if _, ok := Filter(key, "subject", " !? "); ok {
		t.Error("a filter without a word matches")
	}
	if ts, _ := Filter(key, "subject", "billing dispute"); ts[0] == Of(key, "name", "billing") {
		t.Error("a subject word and a name share a token")
	}
	q, _ := Query(key, "tel", "+1 555 555 0101")
	if ts, ok := Filter(key, "tel", "tel:+15555550101"); !ok || len(ts) != 1 || ts[0] != q {
		t.Errorf("tel filter: %v", ts)
	}
}

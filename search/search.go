// Package search derives the blind index of a tenant's vCons: each party's
// tel, mailto and name (and, if the tenant asks, the subject's words) is
// normalised, then kept only as HMAC-SHA-256 under the tenant's index key,
// truncated to 16 bytes. The catalog holds these tokens beside version ids
// and never a clear value; a query computes the same token from its filter
// and looks it up. Encrypted vCons cannot be read, so they are not indexed.
package search

import (
	"crypto/hmac"
	"crypto/sha256"
	"slices"
	"strings"
	"unicode"

	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/vcon"
)

// TokenSize is the length of a stored token.
const TokenSize = 16

// Token is one index entry.
type Token = [TokenSize]byte

// Fields a query may filter on. A subject filter matches only what a
// tenant with the setting parties+subject indexed (docs/search.md).
var Fields = []string{"tel", "mailto", "name", "subject"}

// Normalize returns the form of value that field's tokens are made from,
// or "" when nothing searchable is left.
func Normalize(field, value string) string {
	switch field {
	case "tel":
		// E.164 digits: "+1 555 555 0101", "+15555550101" and
		// "tel:+15555550101" are one number.
		v := strings.TrimPrefix(strings.TrimSpace(value), "tel:")
		var b strings.Builder
		for _, r := range v {
			if r >= '0' && r <= '9' {
				b.WriteRune(r)
			} else if r == ';' {
				break // tel URI parameters (";ext=12") are not the number
			}
		}
		return b.String()
	case "mailto":
		v := strings.TrimSpace(value)
		if len(v) >= 7 && strings.EqualFold(v[:7], "mailto:") {
			v = v[7:]
		}
		return strings.ToLower(v)
	case "name", "subject":
		return strings.Join(strings.Fields(strings.ToLower(value)), " ")
	}
	return ""
}

// Of is the token of an already normalised value of field.
func Of(key []byte, field, normalized string) Token {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(field))
	mac.Write([]byte{0})
	mac.Write([]byte(normalized))
	var t Token
	copy(t[:], mac.Sum(nil))
	return t
}

// Query is the token a filter looks up; ok is false when the filter
// normalises to nothing (and so can match nothing).
func Query(key []byte, field, value string) (Token, bool) {
	n := Normalize(field, value)
	if n == "" {
		return Token{}, false
	}
	return Of(key, field, n), true
}

// MaxWords bounds the words of a subject filter: each is one more lookup
// of the query.
const MaxWords = 16

// Words are the words of a subject as the index keeps them: runs of
// letters and digits, each normalised as a subject. A subject filter is
// split the same way.
func Words(subject string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(subject, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		out = append(out, Normalize("subject", w))
	}
	return out
}

// Filter is the tokens a query filter looks up, every one of which a match
// must hold: one for tel, mailto and name, one per word for subject. ok is
// false when the filter leaves nothing searchable (and so can match
// nothing).
func Filter(key []byte, field, value string) ([]Token, bool) {
	if field != "subject" {
		t, ok := Query(key, field, value)
		return []Token{t}, ok
	}
	var out []Token
	for _, w := range Words(value) {
		if t := Of(key, field, w); w != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, len(out) > 0
}

// Tokens are the distinct tokens of a vCon as mode indexes it.
func Tokens(key []byte, m *vcon.Meta, mode vocab.SearchMode) []Token {
	if mode == vocab.SearchOff || m == nil || m.Form == vocab.FormEncrypted {
		return nil
	}
	seen := map[Token]bool{}
	var out []Token
	add := func(field, value string) {
		if t, ok := Query(key, field, value); ok && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	for _, p := range m.Parties {
		add("tel", p.Tel)
		add("mailto", p.Mailto)
		add("name", p.Name)
	}
	if mode == vocab.SearchPartiesSubject && m.Subject != nil {
		for _, w := range Words(*m.Subject) {
			add("subject", w)
		}
	}
	return out
}

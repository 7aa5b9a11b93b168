package vcon

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
)

// refInspect is a second reading of the package's rules, written with
// encoding/json over a document held whole: tests compare Inspect with it
// on every real vCon and on every fuzz input. It returns the Meta, or the
// kind of refusal: "syntax", "nesting", "invalid" or "too large".
func refInspect(data []byte, limit int64) (*Meta, string) {
	if int64(len(data)) > limit {
		return nil, "too large"
	}
	var top any
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, "syntax"
	}
	if refDepth(data) > maxDepth {
		return nil, "nesting"
	}
	obj, ok := top.(map[string]any)
	if !ok {
		return nil, "invalid"
	}
	if refDup(data) {
		return nil, "invalid"
	}
	m := &Meta{Form: refForm(obj), PartyCount: CountUnknown, DialogCount: CountUnknown, Size: int64(len(data))}
	var uuid any
	switch m.Form {
	case vocab.FormEncrypted:
		u, _ := obj["unprotected"].(map[string]any)
		uuid = u["uuid"]
	case vocab.FormSigned:
		if h, _ := obj["header"].(map[string]any); obj["signatures"] == nil && h["uuid"] != nil {
			uuid = h["uuid"] // the flattened form's
		}
		if sigs, ok := obj["signatures"].([]any); ok {
			for _, sig := range sigs {
				sm, _ := sig.(map[string]any)
				h, _ := sm["header"].(map[string]any)
				if h["uuid"] != nil {
					uuid = h["uuid"]
					break
				}
			}
		}
		p, dup, tooLarge := refPayload(obj["payload"], limit)
		switch {
		case dup:
			return nil, "invalid"
		case uuid != nil:
		case p != nil:
			uuid = p["uuid"]
		case tooLarge:
			return nil, "too large"
		}
		if p != nil {
			refFill(m, p)
		}
	default:
		uuid = obj["uuid"]
		refFill(m, obj)
	}
	s, ok := uuid.(string)
	if !ok {
		return nil, "invalid"
	}
	id, err := ids.Parse(string(clean([]byte(s), maxShort)))
	if err != nil {
		return nil, "invalid"
	}
	m.UUID = id.String()
	return m, ""
}

func refForm(obj map[string]any) vocab.Form {
	has := func(k string) bool { _, ok := obj[k]; return ok }
	switch {
	case has("ciphertext") && has("recipients"):
		return vocab.FormEncrypted
	case has("payload") && (has("signatures") || has("signature")):
		return vocab.FormSigned
	}
	return vocab.FormUnsigned
}

// refPayload decodes a payload whole: '=' padding only at the end, the
// standard alphabet allowed, gzip when it starts with its magic. dup
// reports a JSON object payload, of any form, that repeats a member the
// package reads.
func refPayload(v any, limit int64) (p map[string]any, dup, tooLarge bool) {
	s, ok := v.(string)
	if !ok {
		return nil, false, false
	}
	s = strings.NewReplacer("\r", "", "\n", "", "+", "-", "/", "_").Replace(s)
	if i := strings.IndexByte(s, '='); i >= 0 {
		if strings.Trim(s[i:], "=") != "" {
			return nil, false, false
		}
		s = s[:i]
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, false, false
	}
	if len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, false, false
		}
		b, err = io.ReadAll(io.LimitReader(zr, limit+1))
		if err != nil {
			return nil, false, false
		}
		if int64(len(b)) > limit {
			return nil, false, true
		}
	}
	if refDepth(b) > maxDepth {
		return nil, false, false
	}
	if err := json.Unmarshal(b, &p); err != nil || p == nil {
		return nil, false, false
	}
	if refDup(b) {
		return nil, true, false
	}
	if refForm(p) != vocab.FormUnsigned {
		return nil, false, false
	}
	return p, false, false
}

func refFill(m *Meta, obj map[string]any) {
	str := func(v any, max int) string {
		s, _ := v.(string)
		return string(clean([]byte(s), max))
	}
	tm := func(v any) *time.Time {
		s, ok := v.(string)
		if !ok {
			return nil
		}
		t, err := time.Parse(time.RFC3339, str(s, maxShort))
		if err != nil {
			return nil
		}
		return &t
	}
	m.Syntax = str(obj["vcon"], maxShort)
	m.CreatedAt = tm(obj["created_at"])
	m.UpdatedAt = tm(obj["updated_at"])
	if _, ok := obj["subject"].(string); ok {
		s := str(obj["subject"], MaxSubjectLen)
		m.Subject = &s
	}
	m.PartyCount, m.DialogCount = 0, 0
	if ps, ok := obj["parties"].([]any); ok {
		m.PartyCount = len(ps)
		for i, p := range ps {
			if i == MaxParties {
				break
			}
			pm, _ := p.(map[string]any)
			m.Parties = append(m.Parties, Party{
				Tel:    str(pm["tel"], MaxPartyFieldLen),
				Mailto: str(pm["mailto"], MaxPartyFieldLen),
				Name:   str(pm["name"], MaxPartyFieldLen),
			})
		}
	}
	if ds, ok := obj["dialog"].([]any); ok {
		m.DialogCount = len(ds)
	}
}

// refDup reports whether a valid JSON text, whose top level is an object,
// repeats within one object a member the package reads: a top-level one,
// tel, mailto or name of an object in parties, header of an object in
// signatures, or uuid of such a header or of unprotected.
func refDup(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	top, err := refOrdered(dec)
	if err != nil {
		panic(err) // the callers pass valid JSON only
	}
	o, _ := top.(refObject)
	if o.dup("uuid", "vcon", "created_at", "updated_at", "subject", "parties", "dialog", "payload", "signatures", "ciphertext", "recipients", "unprotected",
		"attachments", "critical", "protected", "header", "signature") {
		return true
	}
	for _, m := range o {
		switch m.key {
		case "parties":
			a, _ := m.value.([]any)
			for _, p := range a {
				if p, _ := p.(refObject); p.dup("tel", "mailto", "name") {
					return true
				}
			}
		case "signatures":
			a, _ := m.value.([]any)
			for _, sig := range a {
				sig, _ := sig.(refObject)
				if sig.dup("header", "protected", "signature") {
					return true
				}
				for _, h := range sig {
					if hdr, _ := h.value.(refObject); h.key == "header" && hdr.dup("uuid") {
						return true
					}
				}
			}
		case "unprotected", "header":
			if u, _ := m.value.(refObject); u.dup("uuid") {
				return true
			}
		}
	}
	return false
}

// refObject is a JSON object with its members in order, repeats kept.
type refObject []refMember

type refMember struct {
	key   string
	value any
}

// dup reports whether one of names is the key of two members.
func (o refObject) dup(names ...string) bool {
	for _, n := range names {
		k := 0
		for _, m := range o {
			if m.key == n {
				k++
			}
		}
		if k > 1 {
			return true
		}
	}
	return false
}

// refOrdered reads the next value with objects as refObject.
func refOrdered(dec *json.Decoder) (any, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t {
	case json.Delim('{'):
		o := refObject{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := refOrdered(dec)
			if err != nil {
				return nil, err
			}
			o = append(o, refMember{k.(string), v})
		}
		_, err := dec.Token()
		return o, err
	case json.Delim('['):
		a := []any{}
		for dec.More() {
			v, err := refOrdered(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token()
		return a, err
	}
	return t, nil
}

// refDepth is the deepest nesting of a valid JSON text.
func refDepth(b []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// diffMeta describes how got differs from want, "" when it does not.
func diffMeta(got, want *Meta) string {
	var d []string
	f := func(name string, g, w any) {
		if fmt.Sprint(g) != fmt.Sprint(w) {
			d = append(d, fmt.Sprintf("%s = %v, want %v", name, g, w))
		}
	}
	f("Form", got.Form, want.Form)
	f("UUID", got.UUID, want.UUID)
	f("Syntax", got.Syntax, want.Syntax)
	tm := func(name string, g, w *time.Time) {
		if (g == nil) != (w == nil) || g != nil && !g.Equal(*w) {
			d = append(d, fmt.Sprintf("%s = %v, want %v", name, g, w))
		}
	}
	tm("CreatedAt", got.CreatedAt, want.CreatedAt)
	tm("UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	if (got.Subject == nil) != (want.Subject == nil) || got.Subject != nil && *got.Subject != *want.Subject {
		d = append(d, fmt.Sprintf("Subject = %s, want %s", quotePtr(got.Subject), quotePtr(want.Subject)))
	}
	f("Parties", fmt.Sprintf("%q", got.Parties), fmt.Sprintf("%q", want.Parties))
	f("PartyCount", got.PartyCount, want.PartyCount)
	f("DialogCount", got.DialogCount, want.DialogCount)
	f("Gzip", got.Gzip, want.Gzip)
	f("Size", got.Size, want.Size)
	return strings.Join(d, "; ")
}

func quotePtr(s *string) string {
	if s == nil {
		return "nil"
	}
	return fmt.Sprintf("%q", *s)
}

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

	"github.com/vcon-server/vcon-server/ids"
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
	m := &Meta{Form: refForm(obj), PartyCount: CountUnknown, DialogCount: CountUnknown, Size: int64(len(data))}
	var uuid any
	switch m.Form {
	case Encrypted:
		u, _ := obj["unprotected"].(map[string]any)
		uuid = u["uuid"]
	case Signed:
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
		p, tooLarge := refPayload(obj["payload"], limit)
		switch {
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

func refForm(obj map[string]any) Form {
	has := func(k string) bool { _, ok := obj[k]; return ok }
	switch {
	case has("ciphertext") && has("recipients"):
		return Encrypted
	case has("payload") && has("signatures"):
		return Signed
	}
	return Unsigned
}

// refPayload decodes a payload whole: '=' padding only at the end, the
// standard alphabet allowed, gzip when it starts with its magic.
func refPayload(v any, limit int64) (p map[string]any, tooLarge bool) {
	s, ok := v.(string)
	if !ok {
		return nil, false
	}
	s = strings.NewReplacer("\r", "", "\n", "", "+", "-", "/", "_").Replace(s)
	if i := strings.IndexByte(s, '='); i >= 0 {
		if strings.Trim(s[i:], "=") != "" {
			return nil, false
		}
		s = s[:i]
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, false
	}
	if len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, false
		}
		b, err = io.ReadAll(io.LimitReader(zr, limit+1))
		if err != nil {
			return nil, false
		}
		if int64(len(b)) > limit {
			return nil, true
		}
	}
	if refDepth(b) > maxDepth {
		return nil, false
	}
	if err := json.Unmarshal(b, &p); err != nil || p == nil || refForm(p) != Unsigned {
		return nil, false
	}
	return p, false
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

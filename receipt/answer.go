package receipt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// answerOnly lists the members of the answer of POST and GET /erasures
// (docs/erasure.md) that are not in the receipt's payload by design, with
// why, and what each must hold. Every other member of an answer must
// equal the payload's member of the same name, whatever it is: a field
// added to both is checked without a change here, and a field added to
// the answer alone is refused until it is listed here.
var answerOnly = map[string]func(v any) string{
	// The receipt itself, the signed token that is checked.
	"receipt": func(any) string { return "" },
	// Only a done erasure has a receipt, and its answer says so.
	"state": func(v any) string {
		if v != "done" {
			return `is not "done", and only a done erasure has a receipt`
		}
		return ""
	},
}

// VerifyAnswer checks a saved JSON answer of POST or GET /erasures: its
// receipt as Verify does, then each of its members against the signed
// payload, so that an answer edited after it was signed is refused with
// the name of what was changed. An answer may leave out members of the
// payload (it has no tenant or times); it may not hold a member twice.
func VerifyAnswer(answer []byte, set Set) (Payload, string, error) {
	a, err := decodeJSON(answer)
	if err != nil {
		return Payload{}, "", invalid("the answer is not JSON: %v", err)
	}
	obj, ok := a.(map[string]any)
	if !ok {
		return Payload{}, "", invalid("the answer is not a JSON object")
	}
	token, ok := obj["receipt"].(string)
	if !ok {
		return Payload{}, "", invalid("the answer has no receipt (an erasure still pending has none yet)")
	}
	p, pb, kid, err := verify(token, set)
	if err != nil {
		return p, kid, err
	}
	signed, err := decodeJSON(pb)
	payload, ok := signed.(map[string]any)
	if err != nil || !ok {
		return Payload{}, kid, invalid("the payload is not an erasure receipt")
	}
	for _, name := range sortedKeys(obj) {
		if check, ok := answerOnly[name]; ok {
			if why := check(obj[name]); why != "" {
				return Payload{}, kid, invalid("the answer's %s %s", name, why)
			}
			continue
		}
		want, ok := payload[name]
		if !ok {
			return Payload{}, kid, invalid("the answer's %s is not in the receipt", name)
		}
		if diff := compare(name, obj[name], want); diff != "" {
			return Payload{}, kid, invalid("the answer's %s", diff)
		}
	}
	return p, kid, nil
}

// compare says where got differs from want, from the member's path
// (erased[2].versions) on, or returns "".
func compare(path string, got, want any) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path + " is not an object, the receipt's is"
		}
		for _, k := range sortedKeys(g) {
			if _, ok := w[k]; !ok {
				return path + "." + k + " is not in the receipt"
			}
			if d := compare(path+"."+k, g[k], w[k]); d != "" {
				return d
			}
		}
		for _, k := range sortedKeys(w) {
			if _, ok := g[k]; !ok {
				return path + "." + k + " is missing, the receipt has it"
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			return path + " is not a list, the receipt's is"
		}
		if len(g) != len(w) {
			return fmt.Sprintf("%s has %s, the receipt's %d", path, entries(len(g)), len(w))
		}
		for i := range w {
			if d := compare(fmt.Sprintf("%s[%d]", path, i), g[i], w[i]); d != "" {
				return d
			}
		}
	default:
		// Scalars: strings, bools, null, and numbers as written
		// (json.Number), so that 2 and 2.0 differ as their bytes do.
		if got != want {
			return fmt.Sprintf("%s is %s, the receipt's %s", path, show(got), show(want))
		}
	}
	return ""
}

func entries(n int) string {
	if n == 1 {
		return "1 entry"
	}
	return fmt.Sprintf("%d entries", n)
}

func show(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// decodeJSON reads one JSON value, numbers as written, refusing a member
// given twice in an object: encoding/json would keep the last, and a
// reader of the file might see the first.
func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	v, err := decodeValue(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

func decodeValue(d *json.Decoder) (any, error) {
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t {
	case json.Delim('{'):
		m := map[string]any{}
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return nil, err
			}
			name := k.(string)
			if _, dup := m[name]; dup {
				return nil, fmt.Errorf("the member %q is given twice", name)
			}
			if m[name], err = decodeValue(d); err != nil {
				return nil, err
			}
		}
		_, err := d.Token() // '}'
		return m, err
	case json.Delim('['):
		l := []any{}
		for d.More() {
			v, err := decodeValue(d)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		_, err := d.Token() // ']'
		return l, err
	}
	return t, nil
}

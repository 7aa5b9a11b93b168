package receipt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// answerOnly lists the members of the answer of POST and GET /erasures
// (docs/erasure.md) that are not in the receipt's payload by design, with
// why, and what each must hold. Every other member of an answer must
// equal the payload's member of the same name, whatever it is: a field
// added to both is checked without a change here, and a field added to
// the answer alone is refused until it is listed here. The one exception
// is lists, erased and held, that the payload leaves out for its digest
// (pageLists).
var answerOnly = map[string]func(v any, erasure string) string{
	// The receipt itself, the signed token that is checked.
	"receipt": func(any, string) string { return "" },
	// Only a done erasure has a receipt, and its answer says so.
	"state": func(v any, _ string) string {
		if v != "done" {
			return `is not "done", and only a done erasure has a receipt`
		}
		return ""
	},
	// Where the next page of the lists is read: it leads to entries, and
	// those are checked (pageLists), not to anything signed.
	"next": func(v any, erasure string) string {
		if s, ok := v.(string); v != nil && (!ok || !strings.HasPrefix(s, "/erasures/"+erasure+"?after=")) {
			return "is neither null nor the path of this erasure's next page"
		}
		return ""
	},
	// The erasure's record in the tenant's audit log and its inclusion
	// proof: signed by the log's checkpoint, not by the receipt, which is
	// signed before a checkpoint can cover the record. Each is checked
	// with the others (auditMembers); the proof's hashes and signature
	// with the log's key (docs/erasure.md).
	"audit_index":  func(any, string) string { return "" },
	"audit_record": func(any, string) string { return "" },
	"audit_proof":  func(any, string) string { return "" },
}

// auditMembers checks that an answer's audit_record is this erasure's
// erase record at audit_index, and that audit_proof is a tlog-proof of
// that index: a record or proof of another erasure pasted in is refused.
func auditMembers(obj map[string]any, erasure string) string {
	rec, hasRec := obj["audit_record"]
	index, hasIndex := obj["audit_index"]
	proof, hasProof := obj["audit_proof"]
	if !hasRec && !hasIndex && !hasProof {
		return ""
	}
	num, _ := index.(json.Number)
	n, err := strconv.ParseUint(num.String(), 10, 64)
	if !hasIndex || err != nil {
		return "audit_index is not a record's index in the log"
	}
	text, ok := rec.(string)
	var r struct {
		Index  *uint64 `json:"index"`
		Action string  `json:"action"`
		Target string  `json:"target"`
	}
	if !ok || json.Unmarshal([]byte(text), &r) != nil || r.Index == nil || *r.Index != n ||
		r.Action != "erase" || !strings.HasPrefix(r.Target, "erasure="+erasure+" ") {
		return "audit_record is not this erasure's record at audit_index"
	}
	if hasProof {
		want := "c2sp.org/tlog-proof@v1\nindex " + strconv.FormatUint(n, 10) + "\n"
		if p, ok := proof.(string); !ok || !strings.HasPrefix(p, want) {
			return "audit_proof is not a tlog-proof of audit_index"
		}
	}
	return ""
}

// pageLists are the members that, once the lists pass MaxListed entries,
// the payload leaves out for its digest while the answer pages them.
var pageLists = []string{"erased", "held"}

// VerifyAnswer checks a saved JSON answer of POST or GET /erasures: its
// receipt as Verify does, then each of its members against the signed
// payload, so that an answer edited after it was signed is refused with
// the name of what was changed. An answer may leave out members of the
// payload (it has no tenant or times); it may not hold a member twice.
//
// The answer may be several, one after another: the pages of one
// erasure's answer, as GET /erasures/{id} and each next give them. When
// the receipt carries the digest of the lists instead of the lists, the
// lists of every page, joined in order, must be those the digest stands
// for; a page alone is refused, since nothing signed says what it lists.
func VerifyAnswer(answers []byte, set Set) (Payload, string, error) {
	pages, err := decodeAll(answers)
	if err != nil {
		return Payload{}, "", invalid("the answer is not JSON: %v", err)
	}
	var p Payload
	var payload map[string]any
	var first, kid string
	var erased []Item
	var held []string
	for i, v := range pages {
		where := ""
		if len(pages) > 1 {
			where = fmt.Sprintf(" (page %d of %d)", i+1, len(pages))
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return Payload{}, kid, invalid("the answer%s is not a JSON object", where)
		}
		token, ok := obj["receipt"].(string)
		switch {
		case !ok:
			return Payload{}, kid, invalid("the answer%s has no receipt (an erasure still pending has none yet)", where)
		case i == 0:
			var pb []byte
			if p, pb, kid, err = verify(token, set); err != nil {
				return Payload{}, kid, err
			}
			signed, err := decodeAll(pb)
			if err != nil || len(signed) != 1 {
				return Payload{}, kid, invalid("the payload is not an erasure receipt")
			}
			payload, _ = signed[0].(map[string]any) // verify read it into p
		case token != first:
			return Payload{}, kid, invalid("the answer%s has another receipt than the first page: the pages are not of one erasure", where)
		}
		first = token
		for _, name := range sortedKeys(obj) {
			_, listed := payload[name]
			switch check, only := answerOnly[name]; {
			case only:
				if why := check(obj[name], p.Erasure); why != "" {
					return Payload{}, kid, invalid("the answer's %s %s%s", name, why, where)
				}
			case !listed && p.Digest != nil && slices.Contains(pageLists, name):
				if err := joinPage(name, obj[name], &erased, &held); err != nil {
					return Payload{}, kid, invalid("the answer's %s%s", err.Error(), where)
				}
			case !listed:
				return Payload{}, kid, invalid("the answer's %s is not in the receipt%s", name, where)
			default:
				if diff := compare(name, obj[name], payload[name]); diff != "" {
					return Payload{}, kid, invalid("the answer's %s%s", diff, where)
				}
			}
		}
		if why := auditMembers(obj, p.Erasure); why != "" {
			return Payload{}, kid, invalid("the answer's %s%s", why, where)
		}
	}
	if d := p.Digest; d != nil {
		if got := ListsDigest(erased, held); got != *d {
			return Payload{}, kid, invalid("the answer's lists (%s erased, %s held, over %d page(s)) are not those its receipt's digest stands for (%d and %d, sha256 %s): give every page, from GET /erasures/{id} through each next, in one file",
				entries(len(erased)), entries(len(held)), len(pages), d.Erased, d.Held, d.SHA256)
		}
	}
	return p, kid, nil
}

// joinPage appends a page's erased or held list to what the pages before
// it listed. Each entry must be as the server writes it, with nothing
// more or less: its digest line does not show every spelling of it.
func joinPage(name string, v any, erased *[]Item, held *[]string) error {
	list, ok := v.([]any)
	if !ok {
		return fmt.Errorf("%s is not a list", name)
	}
	for i, e := range list {
		path := fmt.Sprintf("%s[%d]", name, i)
		if name == "held" {
			u, ok := e.(string)
			if !ok {
				return fmt.Errorf("%s is not a uuid", path)
			}
			*held = append(*held, u)
			continue
		}
		m, ok := e.(map[string]any)
		if !ok || len(m) != 3 {
			return fmt.Errorf("%s is not an object of uuid, versions and whole", path)
		}
		u, ok1 := m["uuid"].(string)
		n, ok2 := m["versions"].(json.Number)
		w, ok3 := m["whole"].(bool)
		versions, err := strconv.Atoi(string(n))
		if !ok1 || !ok2 || !ok3 || err != nil {
			return fmt.Errorf("%s is not an object of uuid, versions and whole", path)
		}
		*erased = append(*erased, Item{UUID: u, Versions: versions, Whole: w})
	}
	return nil
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

// decodeAll reads the JSON values of b, one after another, numbers as
// written, refusing a member given twice in an object: encoding/json
// would keep the last, and a reader of the file might see the first.
func decodeAll(b []byte) ([]any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var vs []any
	for {
		v, err := decodeValue(d)
		if err == io.EOF && len(vs) > 0 {
			return vs, nil
		}
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
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

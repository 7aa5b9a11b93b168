package lawfulbasis

import (
	"crypto/sha256"
	"crypto/sha3"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// draftExample is the draft's "Example Lawful Basis Attachment", word for
// word but for its placeholder content_hash, which no body has: it is
// tested as sent (a mismatch) and without it.
const draftExample = `{
  "purpose": "lawful_basis",
  "start": "2025-01-02T12:15:30Z",
  "party": 0,
  "dialog": 0,
  "encoding": "json",
  "body": {
    "lawful_basis": "consent",
    "expiration": "2026-01-02T12:00:00Z",
    "purpose_grants": [
      {"purpose": "recording", "granted": true, "granted_at": "2025-01-02T12:15:30Z"},
      {"purpose": "transcription", "granted": true, "granted_at": "2025-01-02T12:15:30Z"},
      {"purpose": "sentiment_analysis", "granted": false, "granted_at": "2025-01-02T12:15:30Z"}
    ],
    "proof_mechanisms": [
      {
        "proof_type": "verbal_confirmation",
        "timestamp": "2025-01-02T12:15:30Z",
        "proof_data": {"dialog_reference": 0, "time_offset": "00:01:23", "confirmation_text": "Yes, I consent to recording this call"}
      }
    ],
    "terms_of_service": "https://example.com/terms/v2024.1",
    "status_interval": "30d",
    %s
    "registry": {"type": "scitt", "url": "https://transparency.example.com/lawful_purpose/registry"}
  }
}`

const placeholderHash = `"content_hash": {"algorithm": "sha-256", "canonicalization": "jcs", "value": "a1b2c3d4e5f6789abcdef0123456789abcdef0123456789abcdef0123456789ab"},`

func TestDraftExample(t *testing.T) {
	a, err := Parse([]byte(fmt.Sprintf(draftExample, "")))
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	if a.Basis != "consent" || a.Expiration == nil || !a.Expiration.Equal(exp) || len(a.Grants) != 3 {
		t.Fatalf("%+v", a)
	}
	if g := a.Grants[2]; g.Purpose != "sentiment_analysis" || g.Granted || !g.At.Equal(time.Date(2025, 1, 2, 12, 15, 30, 0, time.UTC)) {
		t.Errorf("%+v", g)
	}
	if err := a.CheckRefs(0, 0); err != nil {
		t.Errorf("party 0, dialog 0 of empty arrays: %v", err)
	}
	// The placeholder is 65 digits, no digest at all.
	_, err = Parse([]byte(fmt.Sprintf(draftExample, placeholderHash)))
	if err == nil || !strings.Contains(err.Error(), "content_hash.value must be 64 hexadecimal digits") {
		t.Errorf("the draft's placeholder hash: %v", err)
	}
}

// body is a small body to which each test adds or changes members.
const body = `{"lawful_basis":"contract","expiration":null,"purpose_grants":[{"purpose":"customer_service","granted":true,"granted_at":"2025-01-02T12:15:30Z"}]%s}`

func attachment(body string) string {
	return `{"purpose":"lawful_basis","party":0,"dialog":0,"encoding":"json","body":` + body + `}`
}

// hashed adds to body (without its closing brace's member list) a
// content_hash by alg over canonical, the JCS form written by hand.
func hashed(alg, canonical string, sum func([]byte) []byte) string {
	v := hex.EncodeToString(sum([]byte(canonical)))
	return fmt.Sprintf(body, `,"content_hash":{"algorithm":"`+alg+`","canonicalization":"jcs","value":"`+v+`"}`)
}

// jcsBody is body's JCS form, by hand: members sorted, no white space.
const jcsBody = `{"expiration":null,"lawful_basis":"contract","purpose_grants":[{"granted":true,"granted_at":"2025-01-02T12:15:30Z","purpose":"customer_service"}]}`

func TestContentHash(t *testing.T) {
	for _, c := range []struct {
		alg string
		sum func([]byte) []byte
	}{
		{"sha-256", func(b []byte) []byte { h := sha256.Sum256(b); return h[:] }},
		{"sha-3-256", func(b []byte) []byte { h := sha3.Sum256(b); return h[:] }},
		{"blake2b-256", func(b []byte) []byte { return blake2b(b, 32) }},
	} {
		if _, err := Parse([]byte(attachment(hashed(c.alg, jcsBody, c.sum)))); err != nil {
			t.Errorf("%s: %v", c.alg, err)
		}
		// One byte off in what was hashed: refused.
		wrong := hashed(c.alg, strings.Replace(jcsBody, "contract", "consent", 1), c.sum)
		if _, err := Parse([]byte(attachment(wrong))); err == nil || !strings.Contains(err.Error(), "does not match") {
			t.Errorf("%s, a hash of another body: %v", c.alg, err)
		}
	}
	// White space and member order do not change the JCS form.
	v := hex.EncodeToString(func() []byte { h := sha256.Sum256([]byte(jcsBody)); return h[:] }())
	spaced := `{ "purpose_grants" : [ { "purpose":"customer_service", "granted_at":"2025-01-02T12:15:30Z", "granted":true } ],
	  "content_hash": {"value":"` + strings.ToUpper(v) + `","algorithm":"sha-256","canonicalization":"jcs"},
	  "expiration": null, "lawful_basis": "contract" }`
	if _, err := Parse([]byte(attachment(spaced))); err != nil {
		t.Errorf("the same body, spaced and reordered, upper-case hex: %v", err)
	}
	// A body sent as a string of JSON text, as the "json" encoding allows.
	quoted := `"` + strings.ReplaceAll(hashed("sha-256", jcsBody, func(b []byte) []byte { h := sha256.Sum256(b); return h[:] }), `"`, `\"`) + `"`
	if _, err := Parse([]byte(attachment(quoted))); err != nil {
		t.Errorf("a body as JSON text: %v", err)
	}
}

// Every rule Parse applies, each broken once.
func TestParseRefuses(t *testing.T) {
	grant := func(g string) string {
		return fmt.Sprintf(body, ``)[:0] + strings.Replace(fmt.Sprintf(body, ""), `{"purpose":"customer_service","granted":true,"granted_at":"2025-01-02T12:15:30Z"}`, g, 1)
	}
	member := func(m string) string { return fmt.Sprintf(body, ","+m) }
	many := make([]string, MaxGrants+1)
	for i := range many {
		many[i] = `{"purpose":"p` + fmt.Sprint(i) + `","granted":true,"granted_at":"2025-01-02T12:15:30Z"}`
	}
	for _, c := range []struct{ name, att, want string }{
		{"not an object", `[]`, "not a JSON object"},
		{"not JSON", `{"purpose":"lawful_basis",`, "not valid JSON"},
		{"a repeated member", `{"purpose":"lawful_basis","party":0,"party":1}`, "appears twice"},
		{"encoding", strings.Replace(attachment(fmt.Sprintf(body, "")), `"json"`, `"base64url"`, 1), `encoding must be "json"`},
		{"no encoding", strings.Replace(attachment(fmt.Sprintf(body, "")), `"encoding":"json",`, ``, 1), `encoding must be "json"`},
		{"no party", strings.Replace(attachment(fmt.Sprintf(body, "")), `"party":0,`, ``, 1), "party is missing"},
		{"no dialog", strings.Replace(attachment(fmt.Sprintf(body, "")), `"dialog":0,`, ``, 1), "dialog is missing"},
		{"negative party", strings.Replace(attachment(fmt.Sprintf(body, "")), `"party":0`, `"party":-1`, 1), "party must be a whole number"},
		{"fractional dialog", strings.Replace(attachment(fmt.Sprintf(body, "")), `"dialog":0`, `"dialog":0.5`, 1), "dialog must be a whole number"},
		{"start", strings.Replace(attachment(fmt.Sprintf(body, "")), `"party":0`, `"start":"2025-01-02 12:15","party":0`, 1), "start must be an RFC 3339 time"},
		{"no body", `{"purpose":"lawful_basis","party":0,"dialog":0,"encoding":"json"}`, "body is missing"},
		{"body not an object", attachment(`[1]`), "body must be a JSON object"},
		{"body a string not JSON", attachment(`"{"`), "body is a string that is not a JSON object"},
		{"basis outside the list", attachment(strings.Replace(fmt.Sprintf(body, ""), "contract", "because", 1)), "body.lawful_basis must be one of consent, contract"},
		{"no basis", attachment(strings.Replace(fmt.Sprintf(body, ""), `"lawful_basis":"contract",`, ``, 1)), "body.lawful_basis must be one of"},
		{"no expiration", attachment(strings.Replace(fmt.Sprintf(body, ""), `"expiration":null,`, ``, 1)), "body.expiration is missing"},
		{"expiration not RFC 3339", attachment(strings.Replace(fmt.Sprintf(body, ""), `"expiration":null`, `"expiration":"2026-01-02"`, 1)), "body.expiration must be an RFC 3339 time"},
		{"expiration a number", attachment(strings.Replace(fmt.Sprintf(body, ""), `"expiration":null`, `"expiration":1767355200`, 1)), "body.expiration must be an RFC 3339 time"},
		{"no grants", attachment(`{"lawful_basis":"contract","expiration":null}`), "body.purpose_grants is missing"},
		{"grants not an array", attachment(`{"lawful_basis":"contract","expiration":null,"purpose_grants":{}}`), "must be an array"},
		{"101 grants", attachment(`{"lawful_basis":"contract","expiration":null,"purpose_grants":[` + strings.Join(many, ",") + `]}`), "has 101 grants; at most 100"},
		{"grant not an object", attachment(grant(`"customer_service"`)), "purpose_grants[0] must be an object"},
		{"purpose upper case", attachment(grant(`{"purpose":"Customer_Service","granted":true,"granted_at":"2025-01-02T12:15:30Z"}`)), "purpose_grants[0].purpose must be 1 to 64 characters"},
		{"purpose with a space", attachment(grant(`{"purpose":"customer service","granted":true,"granted_at":"2025-01-02T12:15:30Z"}`)), "purpose must be 1 to 64"},
		{"purpose empty", attachment(grant(`{"purpose":"","granted":true,"granted_at":"2025-01-02T12:15:30Z"}`)), "purpose must be 1 to 64"},
		{"purpose of 65", attachment(grant(`{"purpose":"` + strings.Repeat("a", 65) + `","granted":true,"granted_at":"2025-01-02T12:15:30Z"}`)), "purpose must be 1 to 64"},
		{"granted a string", attachment(grant(`{"purpose":"a","granted":"yes","granted_at":"2025-01-02T12:15:30Z"}`)), "granted must be true or false"},
		{"no granted_at", attachment(grant(`{"purpose":"a","granted":true}`)), "granted_at is missing"},
		{"granted_at not RFC 3339", attachment(grant(`{"purpose":"a","granted":true,"granted_at":"yesterday"}`)), "granted_at must be an RFC 3339 time"},
		{"conditions", attachment(grant(`{"purpose":"a","granted":true,"granted_at":"2025-01-02T12:15:30Z","conditions":[1]}`)), "conditions must be an array of strings"},
		{"proof without type", attachment(member(`"proof_mechanisms":[{"timestamp":"2025-01-02T12:15:30Z","proof_data":{}}]`)), "proof_mechanisms[0].proof_type must be a string"},
		{"proof time", attachment(member(`"proof_mechanisms":[{"proof_type":"x","timestamp":"noon","proof_data":{}}]`)), "proof_mechanisms[0].timestamp must be an RFC 3339"},
		{"proof data", attachment(member(`"proof_mechanisms":[{"proof_type":"x","timestamp":"2025-01-02T12:15:30Z"}]`)), "proof_data must be an object"},
		{"registry", attachment(member(`"registry":{"type":"scitt"}`)), "body.registry.url must be a string"},
		{"hash not an object", attachment(member(`"content_hash":"abc"`)), "content_hash must be an object"},
		{"hash algorithm", attachment(member(`"content_hash":{"algorithm":"md5","canonicalization":"jcs","value":"00"}`)), "algorithm is not supported"},
		{"hash canonicalization", attachment(member(`"content_hash":{"algorithm":"sha-256","canonicalization":"c14n","value":"00"}`)), "canonicalization is not supported"},
		{"hash value", attachment(member(`"content_hash":{"algorithm":"sha-256","canonicalization":"jcs","value":"xyz"}`)), "value must be 64 hexadecimal digits"},
		{"hash missing value", attachment(member(`"content_hash":{"algorithm":"sha-256","canonicalization":"jcs"}`)), "content_hash.value must be a string"},
		{"too large", `{"purpose":"lawful_basis","x":"` + strings.Repeat("a", MaxAttachmentSize) + `"}`, "over 64 KiB"},
	} {
		_, err := Parse([]byte(c.att))
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(e.Reason, c.want) {
			t.Errorf("%s: got %v, want a reason with %q", c.name, err, c.want)
		}
	}
}

// An expiration in the past is not malformed (the next sweep erases the
// vCon); it only denies.
func TestPastExpirationParses(t *testing.T) {
	b := strings.Replace(fmt.Sprintf(body, ""), `"expiration":null`, `"expiration":"2020-01-01T00:00:00Z"`, 1)
	if _, err := Parse([]byte(attachment(b))); err != nil {
		t.Fatal(err)
	}
}

func TestCheckRefs(t *testing.T) {
	for _, c := range []struct {
		a                Attachment
		parties, dialogs int
		ok               bool
	}{
		{Attachment{Party: 0, Dialog: []int{0}}, 0, 0, true}, // the draft's "use 0 when no ... applies"
		{Attachment{Party: 1, Dialog: []int{0}}, 2, 1, true},
		{Attachment{Party: 2, Dialog: []int{0}}, 2, 1, false},
		{Attachment{Party: 0, Dialog: []int{1}}, 1, 1, false},
		{Attachment{Party: 0, Dialog: []int{0, 2}}, 1, 3, true},
		{Attachment{Party: 0, Dialog: []int{0, 3}}, 1, 3, false},
		{Attachment{Party: 1, Dialog: []int{0}}, 0, 0, false},
	} {
		if err := c.a.CheckRefs(c.parties, c.dialogs); (err == nil) != c.ok {
			t.Errorf("%+v against %d parties and %d dialogs: %v", c.a, c.parties, c.dialogs, err)
		}
	}
	// A dialog given as a list of indexes parses.
	a, err := Parse([]byte(strings.Replace(attachment(fmt.Sprintf(body, "")), `"dialog":0`, `"dialog":[0,2]`, 1)))
	if err != nil || len(a.Dialog) != 2 || a.Dialog[1] != 2 {
		t.Errorf("%+v, %v", a, err)
	}
}

func TestValidPurpose(t *testing.T) {
	for p, ok := range map[string]bool{"customer_service": true, "ai_training2": true, strings.Repeat("z", 64): true,
		"": false, "Marketing": false, "ai-training": false, "é": false, strings.Repeat("z", 65): false} {
		if ValidPurpose(p) != ok {
			t.Errorf("ValidPurpose(%q) != %v", p, ok)
		}
	}
}

package vcon

import (
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/vocab"
)

const testLimit = 64 << 20

var update = flag.Bool("update", false, "rewrite the generated files of test/testdata/vcons")

// projectDir holds the vCons the project writes itself.
var projectDir = filepath.Join("..", "test", "testdata", "vcons")

// sharedDir is the directory of real vCons written by others, or "" (with
// the test skipped, loudly) when it is absent outside CI.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join("..", "..", "shared", "vcons")
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the shared vCons are missing (%v): CI must have ../shared/vcons next to the module", err)
		}
		t.Logf("NOT RUN: the shared vCons are missing (%v); the interoperability tests need ../shared/vcons next to the module", err)
		t.Skip("shared vCons absent: interoperability tests not run")
	}
	return dir
}

func inspectBytes(t testing.TB, data []byte, gz bool) (*Meta, error) {
	t.Helper()
	return Inspect(bytes.NewReader(data), gz, testLimit)
}

func gzipBytes(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func invalidReason(t testing.TB, err error) string {
	t.Helper()
	var inv *InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("error %v (%T), want *InvalidError", err, err)
	}
	return inv.Reason
}

// TestSharedVCons inspects every vCon of ../shared/vcons, plain and
// gzipped, and compares each Meta with the encoding/json reading.
func TestSharedVCons(t *testing.T) {
	dir := sharedDir(t)
	// Looked up with jq: .uuid, .signatures[0].header.uuid, .unprotected.uuid.
	knownUUIDs := map[string]string{
		"ab_call_ext_rec_signed.vcon":    "0195544a-b9b1-8ee4-b9a2-279e0d16bc46",
		"ab_call_ext_rec_decrypted.vcon": "0195544a-b9b1-8ee4-b9a2-279e0d16bc46",
		"ab_call_ext_rec_encrypted.vcon": "0195544a-b9b1-8ee4-b9a2-279e0d16bc46",
		"basic-call.vcon":                "01987d9a-3db5-7186-b6f7-396adcaf35e2",
		"fake-2025-03-04-18c48041.vcon":  "0195b7a6-a6ab-8b71-9dd8-dd37220d739c",
		"ab_email_acct_prob_thread.vcon": "0195544a-cc55-8d85-b9a2-279e0d16bc46",
	}
	seen := map[string]bool{}
	n := 0
	for _, sub := range []string{"ietf-draft-examples", "conserver-dataset"} {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			name := e.Name()
			if !strings.HasSuffix(name, ".vcon") && !strings.HasSuffix(name, ".json") {
				continue
			}
			n++
			data, err := os.ReadFile(filepath.Join(dir, sub, name))
			if err != nil {
				t.Fatal(err)
			}
			t.Run(sub+"/"+name, func(t *testing.T) {
				m, err := inspectBytes(t, data, false)
				switch name {
				case "simple-vcon.vcon":
					if r := invalidReason(t, err); !strings.HasPrefix(r, "not valid JSON: ") {
						t.Errorf("reason %q, want a JSON syntax error", r)
					}
					t.Logf("refused as it should be: %v", err)
					return
				case "ab.vcon":
					if r := invalidReason(t, err); !strings.Contains(r, "uuid") {
						t.Errorf("reason %q does not name the uuid", r)
					}
					t.Logf("refused as it should be: %v", err)
					return
				}
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				want, why := refInspect(data, testLimit)
				if why != "" {
					t.Fatalf("the encoding/json reading refuses it: %s", why)
				}
				if d := diffMeta(m, want); d != "" {
					t.Errorf("Meta differs from the encoding/json reading: %s", d)
				}
				switch {
				case strings.Contains(name, "encrypted"):
					if m.Form != vocab.FormEncrypted {
						t.Errorf("form %s, want encrypted", m.Form)
					}
				case strings.Contains(name, "signed"):
					if m.Form != vocab.FormSigned {
						t.Errorf("form %s, want signed", m.Form)
					}
				}
				if u, ok := knownUUIDs[name]; ok && m.UUID != u {
					t.Errorf("uuid %s, want %s", m.UUID, u)
				}
				if sub == "conserver-dataset" {
					if u := strings.TrimSuffix(name, ".vcon.json"); m.UUID != u {
						t.Errorf("uuid %s, want the file's name %s", m.UUID, u)
					}
				}
				seen[name] = true

				zm, err := inspectBytes(t, gzipBytes(t, data), true)
				if err != nil {
					t.Fatalf("gzipped: %v", err)
				}
				if !zm.Gzip || zm.Size >= int64(len(data)) {
					t.Errorf("gzipped: Gzip %v Size %d", zm.Gzip, zm.Size)
				}
				zm.Gzip, zm.Size = m.Gzip, m.Size
				if d := diffMeta(zm, m); d != "" {
					t.Errorf("gzipped: %s", d)
				}
			})
		}
	}
	if n < 60 {
		t.Errorf("only %d shared vCons found", n)
	}
	for name := range knownUUIDs {
		if !seen[name] {
			t.Errorf("%s was not inspected", name)
		}
	}
}

func tm(s string) *time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return &t
}

func strp(s string) *string { return &s }

// TestProjectVCons checks the Meta of each of the project's own vCons.
func TestProjectVCons(t *testing.T) {
	u040 := Meta{
		Form:      vocab.FormUnsigned,
		UUID:      "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41",
		Syntax:    "0.4.0",
		CreatedAt: tm("2025-05-14T09:30:12.25Z"),
		UpdatedAt: tm("2025-05-14T07:41:03Z"),
		Subject:   strp("Delivery window for order 4471 \u2014 Saturday slot"),
		Parties: []Party{
			{Tel: "+15555550142", Mailto: "priya.n@example.com", Name: "Priya Nandakumar"},
			{Tel: "tel:+15555550199", Name: "Tomasz Wielgus"},
			{Mailto: "dispatch-lead@example.com", Name: "Dispatch lead"},
		},
		PartyCount:  3,
		DialogCount: 2,
	}
	u001 := Meta{
		Form:   vocab.FormUnsigned,
		UUID:   "3d9c1e7a-52b4-4f08-a6c3-0b9e2d714f5c",
		Syntax: "0.0.1",
		Parties: []Party{
			{Mailto: "owen.h@example.com", Name: "Owen Hart"},
			{Mailto: "billing@example.com", Name: "Billing desk"},
		},
		PartyCount:  2,
		DialogCount: 2,
	}
	signed := u040
	signed.Form = vocab.FormSigned
	signedGz := u001
	signedGz.Form = vocab.FormSigned
	encrypted := Meta{Form: vocab.FormEncrypted, UUID: "018f6b31-0a77-7b20-8c4d-2e61f0a9b3c5", PartyCount: CountUnknown, DialogCount: CountUnknown}
	vconLib := Meta{Form: vocab.FormUnsigned, UUID: "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41", CreatedAt: tm("2026-05-01T09:00:00.123456+00:00"),
		Parties: []Party{{Tel: "+15555550100", Name: "Alice"}}, PartyCount: 1} // its basis: TestLawfulBasisVconLib

	valid := map[string]Meta{
		"unsigned-0.4.0.vcon":         u040,
		"unsigned-0.0.1.vcon":         u001,
		"signed.vcon":                 signed,
		"signed-gzip-payload.vcon":    signedGz,
		"encrypted.vcon":              encrypted,
		"vcon-lib-lawful-basis.vcon":  vconLib,
		"unsigned-0.4.0.vcon.gz":      u040,
		"unsigned-0.0.1.vcon.gz":      u001,
		"signed.vcon.gz":              signed,
		"signed-gzip-payload.vcon.gz": signedGz,
		"encrypted.vcon.gz":           encrypted,
	}
	invalid := map[string]string{
		"invalid-not-json.vcon":          "not valid JSON: trailing comma before '}' at byte 149",
		"invalid-no-uuid.vcon":           "no uuid: a vCon needs a uuid (36-character UUID text)",
		"invalid-encrypted-no-uuid.vcon": "encrypted vCon without unprotected.uuid",
		"invalid-uuid-not-uuid.vcon":     "uuid is not a UUID",
		"invalid-top-level-array.vcon":   "not a vCon: the top level is an array, a vCon is a JSON object",
	}
	entries, err := os.ReadDir(projectDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if name == "README.md" {
			continue
		}
		_, isValid := valid[name]
		_, isInvalid := invalid[name]
		if !isValid && !isInvalid {
			t.Errorf("%s: no expectation for this file", name)
		}
	}
	for name, want := range valid {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(projectDir, name))
			if err != nil {
				t.Fatal(err)
			}
			gz := strings.HasSuffix(name, ".gz")
			m, err := inspectBytes(t, data, gz)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			want.Gzip, want.Size = gz, int64(len(data))
			if d := diffMeta(m, &want); d != "" {
				t.Error(d)
			}
			if !gz {
				if ref, why := refInspect(data, testLimit); why != "" {
					t.Errorf("the encoding/json reading refuses it: %s", why)
				} else if d := diffMeta(m, ref); d != "" {
					t.Errorf("differs from the encoding/json reading: %s", d)
				}
			}
		})
	}
	for name, want := range invalid {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(projectDir, name))
			if err != nil {
				t.Fatal(err)
			}
			_, err = inspectBytes(t, data, false)
			if r := invalidReason(t, err); !strings.HasPrefix(r, want) {
				t.Errorf("reason %q, want it to start with %q", r, want)
			}
		})
	}
}

// TestGenerateTestdata rewrites the generated files of test/testdata/vcons (the
// signed vCons and the .gz copies) from the hand-written ones:
//
//	go test ./vcon -run TestGenerateTestdata -update
func TestGenerateTestdata(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite the generated files of test/testdata/vcons")
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(projectDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(projectDir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b64 := base64.RawURLEncoding.EncodeToString
	// jws writes a JWS General JSON vCon. The signature is a fixed-length
	// digest, not a signature: the server never verifies one.
	jws := func(payload []byte, header string) []byte {
		p := b64(payload)
		fake := sha512.Sum512([]byte("not a signature: " + p))
		return fmt.Appendf(nil, `{
  "payload": %q,
  "signatures": [
    {
      "protected": %q,
      "header": %s,
      "signature": %q
    }
  ]
}
`, p, b64([]byte(`{"alg":"ES256","cty":"application/vcon+json"}`)), header, b64(fake[:]))
	}
	var v struct{ UUID string }
	u040 := read("unsigned-0.4.0.vcon")
	if err := json.Unmarshal(u040, &v); err != nil {
		t.Fatal(err)
	}
	write("signed.vcon", jws(u040, fmt.Sprintf(`{"kid": "recorder-7.example.com", "uuid": %q}`, v.UUID)))
	write("signed-gzip-payload.vcon", jws(gzipBytes(t, read("unsigned-0.0.1.vcon")), `{"kid": "recorder-7.example.com"}`))
	for _, name := range []string{"unsigned-0.4.0.vcon", "unsigned-0.0.1.vcon", "signed.vcon", "signed-gzip-payload.vcon", "encrypted.vcon"} {
		write(name+".gz", gzipBytes(t, read(name)))
	}
}

func TestInvalidJSON(t *testing.T) {
	const u = `"uuid": "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41"`
	for _, tc := range []struct {
		name, body, reason string
	}{
		{"empty", ``, "empty body"},
		{"only space", " \n\t ", "unexpected end of input at byte 4 where a value was expected"},
		{"trailing comma in object", `{` + u + `,}`, "trailing comma before '}' at byte 48"},
		{"trailing comma in array", `{` + u + `, "dialog": [1, 2,]}`, "trailing comma before ']'"},
		{"trailing comma in skipped array", `{` + u + `, "x": [[1,]]}`, "trailing comma before ']'"},
		{"trailing comma in skipped object", `{` + u + `, "x": {"a": 1,}}`, "trailing comma before '}'"},
		{"unterminated string", `{` + u + `, "subject": "abc`, "unexpected end of input at byte 64 in a string"},
		{"unterminated object", `{` + u, "unexpected end of input at byte 47 in an object"},
		{"bad escape", `{` + u + `, "subject": "a\x"}`, `invalid escape "\\x" in a string at byte 62`},
		{"bad unicode escape", `{` + u + `, "x": "\u12G4"}`, `invalid \u escape at byte 55`},
		{"short unicode escape", `{` + u + `, "x": "\u12"}`, `invalid \u escape`},
		{"leading zero", `{` + u + `, "n": 012}`, "number with a leading zero at byte 54"},
		{"leading zero negative", `{` + u + `, "n": -00}`, "number with a leading zero"},
		{"plus sign", `{` + u + `, "n": +1}`, "unexpected character '+' at byte 54, want a value"},
		{"bare dot", `{` + u + `, "n": 1.}`, "want a digit after '.' in a number"},
		{"dot first", `{` + u + `, "n": .5}`, "unexpected character '.'"},
		{"empty exponent", `{` + u + `, "n": 1e}`, "want a digit in a number's exponent"},
		{"minus alone", `{` + u + `, "n": -}`, "unexpected character '}' at byte 55, want a digit"},
		{"NaN", `{` + u + `, "n": NaN}`, "unexpected character 'N' at byte 54, want a value: NaN and Infinity are not JSON numbers; send null or a string instead"},
		{"Infinity", `{` + u + `, "n": [1, Infinity]}`, "unexpected character 'I' at byte 58, want a value: NaN and Infinity are not JSON numbers"},
		{"minus Infinity", `{` + u + `, "n": -Infinity}`, "unexpected character 'I' at byte 55, want a digit: NaN and Infinity are not JSON numbers"},
		{"NaN at the end", `{` + u + `, "n": NaN`, "want a value: NaN and Infinity are not JSON numbers"},
		{"not NaN", `{` + u + `, "n": Nan}`, "unexpected character 'N' at byte 54, want a value"},
		{"not Infinity", `{` + u + `, "n": -Inf}`, "unexpected character 'I' at byte 55, want a digit"},
		{"bad literal", `{` + u + `, "b": tru}`, "unexpected character '}' at byte 57, want the literal true"},
		{"capital literal", `{` + u + `, "b": True}`, "unexpected character 'T'"},
		{"garbage after object", `{` + u + `} x`, "unexpected character 'x' at byte 49, want the end of input"},
		{"second object", `{` + u + `}{}`, "unexpected character '{' at byte 48, want the end of input"},
		{"raw tab in string", "{" + u + `, "subject": "a` + "\t" + `b"}`, "control character 0x09 in a string at byte 62 (it must be escaped)"},
		{"raw newline in key", "{\"a\nb\": 1}", "control character 0x0a in a string at byte 3"},
		{"NUL in string", "{\"a\": \"\x00\"}", "control character 0x00"},
		{"missing colon", `{"uuid" "x"}`, "unexpected character '\"' at byte 8, want ':' after an object key"},
		{"missing value", `{"uuid": }`, "unexpected character '}' at byte 9, want a value"},
		{"unquoted key", `{uuid: 1}`, "unexpected character 'u' at byte 1, want a string key"},
		{"single quotes", `{'uuid': 1}`, "unexpected character '\\''"},
		{"comment", "{" + u + "} // done", "unexpected character '/'"},
		{"missing comma", `{"a": 1 "b": 2}`, "want ',' or '}' after an object member"},
		{"missing comma in array", `{"a": [1 2]}`, "want ',' or ']' after an array element"},
		{"mismatched close", `{"a": [1}`, "want ',' or ']' after an array element"},
		{"byte order mark after white space", " \xef\xbb\xbf{" + u + "}", "unexpected byte 0xef at byte 1, want a value"},
		{"two byte order marks", "\xef\xbb\xbf\xef\xbb\xbf{" + u + "}", "unexpected byte 0xef at byte 3, want a value"},
		{"byte order mark after the object", "{" + u + "}\xef\xbb\xbf", "unexpected byte 0xef at byte 48, want the end of input"},
		{"byte order mark before a member", "{\xef\xbb\xbf" + u + "}", "unexpected byte 0xef at byte 1, want a string key"},
		{"half a byte order mark", "\xef\xbb{" + u + "}", "unexpected byte 0xef at byte 0, want a value"},
		{"gzip sent plain", "\x1f\x8b\x08\x00", "the body starts with the gzip magic 1f 8b"},
		{"top-level garbage", `hello`, "unexpected character 'h' at byte 0"},
		{"truncated literal", `{"a": nul`, "unexpected end of input at byte 9 in null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := inspectBytes(t, []byte(tc.body), false)
			var inv *InvalidError
			if !errors.As(err, &inv) || !inv.syntax {
				t.Fatalf("error %v, want a JSON syntax error", err)
			}
			if !strings.HasPrefix(inv.Reason, "not valid JSON: ") || !strings.Contains(inv.Reason, tc.reason) {
				t.Errorf("reason %q, want it to contain %q", inv.Reason, tc.reason)
			}
			if strings.HasPrefix(tc.name, "not ") && strings.Contains(inv.Reason, "NaN") {
				t.Errorf("reason %q speaks of NaN", inv.Reason)
			}
			if json.Valid([]byte(tc.body)) {
				t.Errorf("encoding/json calls this valid")
			}
		})
	}
}

func TestStrings(t *testing.T) {
	const u = `"uuid": "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41"`
	long := strings.Repeat("é", 3000) // 6000 bytes
	for _, tc := range []struct{ name, subject, want string }{
		{"escapes", `"a\"b\\c\/d\b\f\n\r\t"`, "a\"b\\c/d\b\f\n\r\t"},
		{"unicode", `"\u00e9\u20AC"`, "é€"},
		{"surrogate pair", `"\ud83d\ude9a truck"`, "\U0001F69A truck"},
		{"lone high surrogate", `"\ud800x"`, "\uFFFDx"},
		{"lone low surrogate", `"\udc00x"`, "\uFFFDx"},
		{"high then not low", `"\ud800\u0041"`, "\uFFFDA"},
		{"high then high", `"\ud800\ud800\udc00"`, "\uFFFD\U00010000"},
		{"invalid UTF-8", "\"a\xffb\xc3\"", "a\uFFFDb\uFFFD"},
		{"DEL is allowed", "\"\x7f\"", "\x7f"},
		{"cut at a character boundary", `"` + long + `"`, long[:MaxSubjectLen]},
		{"cut with one byte of ASCII first", `"x` + long + `"`, "x" + long[:MaxSubjectLen-2]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(`{` + u + `, "subject": ` + tc.subject + `}`)
			m, err := inspectBytes(t, body, false)
			if err != nil {
				t.Fatal(err)
			}
			if m.Subject == nil || *m.Subject != tc.want {
				t.Errorf("subject %s, want %q", quotePtr(m.Subject), tc.want)
			}
			if ref, why := refInspect(body, testLimit); why != "" || *ref.Subject != *m.Subject {
				t.Errorf("the encoding/json reading gives %v %q", ref, why)
			}
		})
	}
}

func TestFields(t *testing.T) {
	const u = "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41"
	many := make([]string, 1500)
	for i := range many {
		many[i] = fmt.Sprintf(`{"tel": "+1555555%04d"}`, i)
	}
	for _, tc := range []struct {
		name, body string
		check      func(*Meta) string
		reason     string
	}{
		{name: "uppercase uuid is lowercased", body: `{"uuid": "018F6B2E-4C1A-7D3E-9A51-6C2F0E8B7D41"}`,
			check: func(m *Meta) string { return want(m.UUID, u) }},
		{name: "members not read may repeat", body: `{"uuid": "` + u + `", "x": 1, "x": 2, "parties": [{"tel": "+15555550100", "role": "a", "role": "b"}], "dialog": [{"parties": 0, "parties": 1}]}`,
			check: func(m *Meta) string { return want(fmt.Sprint(m.Parties, m.DialogCount), "[{+15555550100  }] 1") }},
		{name: "escaped key", body: `{"\u0075uid": "` + u + `"}`,
			check: func(m *Meta) string { return want(m.UUID, u) }},
		{name: "minimal", body: `{"uuid":"` + u + `"}`,
			check: func(m *Meta) string {
				return want(fmt.Sprintf("%q %v %v %v %d %d", m.Syntax, m.CreatedAt, m.Subject, m.Parties, m.PartyCount, m.DialogCount), `"" <nil> <nil> [] 0 0`)
			}},
		{name: "parties not objects keep their places", body: `{"uuid":"` + u + `", "parties": [null, {"tel": 5, "name": "Ada"}, "x"]}`,
			check: func(m *Meta) string {
				return want(fmt.Sprintf("%q %d", m.Parties, m.PartyCount), `[{"" "" ""} {"" "" "Ada"} {"" "" ""}] 3`)
			}},
		{name: "parties capped but counted", body: `{"uuid":"` + u + `", "parties": [` + strings.Join(many, ",") + `]}`,
			check: func(m *Meta) string {
				return want(fmt.Sprintf("%d %d %s", len(m.Parties), m.PartyCount, m.Parties[999].Tel), "1000 1500 +15555550999")
			}},
		{name: "parties not an array", body: `{"uuid":"` + u + `", "parties": {"tel": "+15555550100"}, "dialog": "x"}`,
			check: func(m *Meta) string { return want(fmt.Sprint(m.Parties, m.PartyCount, m.DialogCount), "[] 0 0") }},
		{name: "time without zone is not RFC 3339", body: `{"uuid":"` + u + `", "created_at": "2024-03-16T07:04:07.138769", "updated_at": "2024-03-16T07:04:07.1-05:00"}`,
			check: func(m *Meta) string {
				return want(fmt.Sprint(m.CreatedAt, m.UpdatedAt.UTC()), "<nil> 2024-03-16 12:04:07.1 +0000 UTC")
			}},
		{name: "any syntax version", body: `{"uuid":"` + u + `", "vcon": "9.9"}`,
			check: func(m *Meta) string { return want(m.Syntax, "9.9") }},
		{name: "uuid a number", body: `{"uuid": 42}`, reason: "uuid is a number: a vCon needs a uuid"},
		{name: "uuid too short", body: `{"uuid": "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d4"}`, reason: "uuid is not a UUID: want 36-character UUID text"},
		{name: "uuid without dashes", body: `{"uuid": "018f6b2e4c1a7d3e9a516c2f0e8b7d41"}`, reason: "uuid is not a UUID"},
		{name: "uuid braces", body: `{"uuid": "{018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d4}"}`, reason: "uuid is not a UUID"},
		{name: "top level string", body: `"hello"`, reason: "not a vCon: the top level is a string, a vCon is a JSON object"},
		{name: "top level number", body: ` 5 `, reason: "not a vCon: the top level is a number"},
		{name: "flattened JWS", body: `{"payload": "e30", "signature": "x", "header": {"uuid": "` + u + `"}}`,
			check: func(m *Meta) string { return want(fmt.Sprintf("%s %s", m.Form, m.UUID), "signed "+u) }},
		{name: "payload without a signature", body: `{"payload": "e30", "header": {"uuid": "` + u + `"}}`,
			reason: "no uuid: a vCon needs a uuid (36-character UUID text); a signed vCon needs payload and signatures"},
		{name: "JWE without recipients", body: `{"ciphertext": "AAAA", "unprotected": {"uuid": "` + u + `"}}`,
			reason: "no uuid: a vCon needs a uuid (36-character UUID text); an encrypted vCon needs ciphertext and recipients"},
		{name: "encrypted", body: `{"ciphertext": "AAAA", "recipients": [], "unprotected": {"uuid": "` + u + `"}, "uuid": "ignored"}`,
			check: func(m *Meta) string {
				return want(fmt.Sprintf("%s %s %d %d", m.Form, m.UUID, m.PartyCount, m.DialogCount), "encrypted "+u+" -1 -1")
			}},
		{name: "encrypted uuid not a uuid", body: `{"ciphertext": "", "recipients": [], "unprotected": {"uuid": "x"}}`, reason: "unprotected.uuid is not a UUID"},
		{name: "encrypted unprotected not an object", body: `{"ciphertext": "", "recipients": [], "unprotected": "x"}`, reason: "encrypted vCon without unprotected.uuid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := inspectBytes(t, []byte(tc.body), false)
			if tc.reason != "" {
				if r := invalidReason(t, err); !strings.HasPrefix(r, tc.reason) {
					t.Errorf("reason %q, want it to start with %q", r, tc.reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := tc.check(m); d != "" {
				t.Error(d)
			}
			if ref, why := refInspect([]byte(tc.body), testLimit); why != "" {
				t.Errorf("the encoding/json reading refuses it: %s", why)
			} else if d := diffMeta(m, ref); d != "" {
				t.Errorf("differs from the encoding/json reading: %s", d)
			}
		})
	}
}

func want(got, want string) string {
	if got != want {
		return fmt.Sprintf("got %q, want %q", got, want)
	}
	return ""
}

func TestSigned(t *testing.T) {
	const u = "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41"
	const u2 = "3d9c1e7a-52b4-4f08-a6c3-0b9e2d714f5c"
	inner := []byte(`{"vcon": "0.4.0", "uuid": "` + u2 + `", "subject": "inner", "parties": [{"tel": "+15555550101"}], "dialog": [{}, {}, {}]}`)
	b64 := base64.RawURLEncoding.EncodeToString
	signed := func(payload, header string) string {
		return `{"payload": ` + payload + `, "signatures": [{"protected": "e30", "header": ` + header + `, "signature": "AAAA"}]}`
	}
	hdr := `{"uuid": "` + u + `"}`
	for _, tc := range []struct {
		name, body string
		uuid       string // accepted with this uuid
		counts     string // "parties dialogs"
		reason     string // or refused with a reason starting so
		tooLarge   bool   // or refused as too large
	}{
		{name: "header uuid wins", body: signed(`"`+b64(inner)+`"`, hdr), uuid: u, counts: "1 3"},
		{name: "payload uuid", body: signed(`"`+b64(inner)+`"`, `{"alg": "ES256"}`), uuid: u2, counts: "1 3"},
		{name: "no header", body: `{"signatures": [{"signature": "AAAA"}], "payload": "` + b64(inner) + `"}`, uuid: u2, counts: "1 3"},
		{name: "first header with a uuid", body: `{"payload": "", "signatures": [{"header": {}}, {"header": {"uuid": null}}, {"header": {"uuid": "` + u + `"}}, {"header": {"uuid": "x"}}]}`, uuid: u, counts: "-1 -1"},
		{name: "gzip payload", body: signed(`"`+b64(gzipBytes(t, inner))+`"`, `{}`), uuid: u2, counts: "1 3"},
		{name: "payload cut short, header", body: signed(`"`+b64(inner[:len(inner)-1])+`"`, hdr), uuid: u, counts: "-1 -1"},
		{name: "padding tolerated", body: signed(`"`+base64.URLEncoding.EncodeToString(append(inner, ' '))+`"`, `{}`), uuid: u2, counts: "1 3"},
		{name: "standard alphabet tolerated", body: signed(`"`+stdBase64(t, `{"uuid": "`+u2+`", "subject": "`+"\uffff\uffff\uffff"+`"}`)+`"`, `{}`), uuid: u2, counts: "0 0"},
		{name: "escaped payload", body: signed(`"`+strings.ReplaceAll(b64(inner), "e", `\u0065`)+`"`, `{}`), uuid: u2, counts: "1 3"},
		{name: "payload not base64 but header", body: signed(`"!!!"`, hdr), uuid: u, counts: "-1 -1"},
		{name: "payload not base64", body: signed(`"!!!"`, `{}`), reason: "signed vCon without a uuid: no signatures[].header.uuid, and its payload cannot be read: it is not base64url (illegal base64 data at input byte 0)"},
		{name: "payload padding inside", body: signed(`"e3=0"`, `{}`), reason: "signed vCon without a uuid: no signatures[].header.uuid, and its payload cannot be read: it is not base64url (characters after '=' padding)"},
		{name: "payload not a string", body: signed(`{"a": 1}`, `{}`), reason: "signed vCon without a uuid: no signatures[].header.uuid, and its payload cannot be read: it is an object, not a base64url string"},
		{name: "payload JSON without uuid", body: signed(`"`+b64([]byte(`{"vcon": "0.4.0"}`))+`"`, `{}`), reason: "signed vCon without a uuid: no signatures[].header.uuid, and its payload has no uuid"},
		{name: "payload bad uuid", body: signed(`"`+b64([]byte(`{"uuid": "x"}`))+`"`, `{}`), reason: "the payload's uuid is not a UUID"},
		{name: "payload syntax error", body: signed(`"`+b64([]byte(`{"uuid": 01}`))+`"`, `{}`), reason: "signed vCon without a uuid: no signatures[].header.uuid, and its payload cannot be read: not valid JSON: number with a leading zero at byte 9"},
		{name: "payload is signed itself", body: signed(`"`+b64([]byte(signed(`"`+b64(inner)+`"`, hdr)))+`"`, `{}`), reason: "signed vCon without a uuid: no signatures[].header.uuid, and its payload cannot be read: it is a signed vCon, not an unsigned one"},
		{name: "payload is signed itself, header", body: signed(`"`+b64([]byte(signed(`"`+b64(inner)+`"`, hdr)))+`"`, hdr), uuid: u, counts: "-1 -1"},
		{name: "payload broken gzip", body: signed(`"`+b64(gzipBytes(t, inner)[:20])+`"`, `{}`), reason: "signed vCon without a uuid: no signatures[].header.uuid, and its payload cannot be read: its gzip is not valid (unexpected EOF)"},
		{name: "payload empty", body: signed(`""`, `{}`), reason: "signed vCon without a uuid: no signatures[].header.uuid, and its payload cannot be read: not valid JSON: empty body"},
		{name: "header uuid not a uuid", body: signed(`"`+b64(inner)+`"`, `{"uuid": "018f6b2e"}`), reason: "signatures[0].header.uuid is not a UUID"},
		{name: "header uuid a number", body: signed(`"`+b64(inner)+`"`, `{"uuid": 7}`), reason: "signatures[0].header.uuid is a number"},
		{name: "payload string broken in the document", body: signed(`"`+b64(inner)[:10]+"\x01"+`"`, hdr), reason: "not valid JSON: control character 0x01 in a string at byte 23"},
		{name: "payload string cut short", body: `{"signatures": [], "payload": "` + b64(inner), reason: "not valid JSON: unexpected end of input"},
		{name: "payload bomb", body: signed(`"`+b64(gzipBytes(t, bytes.Repeat([]byte(" "), 2<<20)))+`"`, `{}`), tooLarge: true},
		{name: "payload bomb, header", body: signed(`"`+b64(gzipBytes(t, bytes.Repeat([]byte(" "), 2<<20)))+`"`, hdr), uuid: u, counts: "-1 -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Inspect(strings.NewReader(tc.body), false, 1<<20)
			switch {
			case tc.tooLarge:
				if !errors.Is(err, ErrTooLarge) {
					t.Fatalf("error %v, want ErrTooLarge", err)
				}
				return
			case tc.uuid == "":
				if r := invalidReason(t, err); !strings.HasPrefix(r, tc.reason) {
					t.Errorf("reason %q, want it to start with %q", r, tc.reason)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if m.Form != vocab.FormSigned || m.UUID != tc.uuid {
				t.Errorf("form %s uuid %s, want signed %s", m.Form, m.UUID, tc.uuid)
			}
			if c := fmt.Sprint(m.PartyCount, " ", m.DialogCount); c != tc.counts {
				t.Errorf("counts %s, want %s", c, tc.counts)
			}
			if ref, why := refInspect([]byte(tc.body), 1<<20); why != "" {
				t.Errorf("the encoding/json reading refuses it: %s", why)
			} else if d := diffMeta(m, ref); d != "" {
				t.Errorf("differs from the encoding/json reading: %s", d)
			}
		})
	}
}

// stdBase64 is doc, with spaces around it, in padded standard base64 that
// holds both '+' and '/'.
func stdBase64(t *testing.T, doc string) string {
	for pad := range 9 {
		e := base64.StdEncoding.EncodeToString([]byte(strings.Repeat(" ", pad%3) + doc + strings.Repeat(" ", pad/3)))
		if strings.Contains(e, "+") && strings.Contains(e, "/") && strings.HasSuffix(e, "=") {
			return e
		}
	}
	t.Fatal("no padding gives '+', '/' and '='")
	return ""
}

// TestGzip covers what a gzip body can do wrong.
func TestGzip(t *testing.T) {
	body := []byte(`{"uuid": "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41", "dialog": [1]}`)
	gz := gzipBytes(t, body)
	twice := append(append([]byte{}, gz...), gzipBytes(t, []byte("\n"))...)
	for _, tc := range []struct {
		name   string
		body   []byte
		reason string // "" when accepted
	}{
		{"ok", gz, ""},
		{"two members", twice, ""},
		{"empty", nil, "not valid gzip: empty body"},
		{"not gzip", body, "not valid gzip: invalid header"},
		{"truncated", gz[:len(gz)-5], "not valid gzip: unexpected EOF"},
		{"bad checksum", append(append([]byte{}, gz[:len(gz)-8]...), 0, 0, 0, 0, byte(len(body)), 0, 0, 0), "not valid gzip: invalid checksum"},
		{"garbage after", append(append([]byte{}, gz...), "this is not gzip"...), "not valid gzip: invalid header"},
		{"gzip twice", gzipBytes(t, gz), "not valid JSON: unexpected byte 0x1f at byte 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := inspectBytes(t, tc.body, true)
			if tc.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !m.Gzip || m.Size != int64(len(tc.body)) || m.DialogCount != 1 {
					t.Errorf("Meta %+v", m)
				}
				return
			}
			if r := invalidReason(t, err); !strings.HasPrefix(r, tc.reason) {
				t.Errorf("reason %q, want it to start with %q", r, tc.reason)
			}
		})
	}
}

// errReader fails with err once its data is read.
type errReader struct {
	data []byte
	err  error
}

func (r *errReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// TestReadErrors: a body that cannot be read is the reader's error, not an
// invalid vCon, whatever the scanner was in the middle of.
func TestReadErrors(t *testing.T) {
	broken := errors.New("connection reset")
	doc := `{"uuid": "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41", "subject": "\u00e9t\u00e9", "n": -1.5e3, "b": true, "payload": "e30", "dialog": [{"x": null}]}`
	for i := 0; i <= len(doc); i++ {
		_, err := Inspect(&errReader{data: []byte(doc[:i]), err: broken}, false, testLimit)
		if !errors.Is(err, broken) {
			t.Fatalf("cut at %d: error %v, want the reader's", i, err)
		}
	}
	gz := gzipBytes(t, []byte(doc))
	for i := 0; i <= len(gz); i++ {
		_, err := Inspect(&errReader{data: gz[:i], err: broken}, true, testLimit)
		if !errors.Is(err, broken) {
			t.Fatalf("gzip cut at %d: error %v, want the reader's", i, err)
		}
	}
}

// eofReader records whether its reader was read to the end.
type eofReader struct {
	r   io.Reader
	eof bool
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		e.eof = true
	}
	return n, err
}

func TestReadsToEOF(t *testing.T) {
	body := []byte("{\"uuid\": \"018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41\"}\n\n")
	for _, gz := range []bool{false, true} {
		b := body
		if gz {
			b = gzipBytes(t, body)
		}
		r := &eofReader{r: bytes.NewReader(b)}
		m, err := Inspect(r, gz, testLimit)
		if err != nil {
			t.Fatal(err)
		}
		if !r.eof || m.Size != int64(len(b)) {
			t.Errorf("gz %v: eof %v size %d, want true %d", gz, r.eof, m.Size, len(b))
		}
	}
}

// gen streams head, then n bytes repeating pattern, then tail, allocating
// only a block of the pattern.
type gen struct {
	head, pattern, tail []byte
	n, off              int64
	block               []byte // pattern repeated, to copy from
}

func (g *gen) Read(p []byte) (int, error) {
	k := 0
	for k < len(p) {
		switch {
		case len(g.head) > 0:
			c := copy(p[k:], g.head)
			g.head = g.head[c:]
			k += c
		case g.off < g.n:
			if len(g.block) == 0 {
				g.block = bytes.Repeat(g.pattern, 64<<10/len(g.pattern))
			}
			c := copy(p[k:min(len(p), k+int(g.n-g.off))], g.block[g.off%int64(len(g.block)):])
			k += c
			g.off += int64(c)
		case len(g.tail) > 0:
			c := copy(p[k:], g.tail)
			g.tail = g.tail[c:]
			k += c
		default:
			if k == 0 {
				return 0, io.EOF
			}
			return k, nil
		}
	}
	return k, nil
}

func (g *gen) size() int64 { return int64(len(g.head)) + g.n + int64(len(g.tail)) }

// b64gen is the base64url of what src reads, streamed.
type b64gen struct {
	src  io.Reader
	in   [3 << 10]byte
	out  [4 << 10]byte
	pend []byte
	done bool
}

func (b *b64gen) Read(p []byte) (int, error) {
	if len(b.pend) == 0 {
		if b.done {
			return 0, io.EOF
		}
		n, err := io.ReadFull(b.src, b.in[:])
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			b.done = true
		} else if err != nil {
			return 0, err
		}
		m := base64.RawURLEncoding.EncodedLen(n)
		base64.RawURLEncoding.Encode(b.out[:m], b.in[:n])
		b.pend = b.out[:m]
		if m == 0 {
			return 0, io.EOF
		}
	}
	n := copy(p, b.pend)
	b.pend = b.pend[n:]
	return n, nil
}

// allocs is the bytes fn allocates; nothing else may run meanwhile.
func allocs(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

const boundedAlloc = 4 << 20

// largeUnsigned is an unsigned vCon with an inline base64 body of n bytes.
func largeUnsigned(n int64) *gen {
	return &gen{
		head:    []byte(`{"vcon": "0.4.0", "uuid": "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41", "parties": [{"tel": "+15555550100"}, {"tel": "+15555550101"}], "dialog": [{"type": "recording", "encoding": "base64url", "body": "`),
		pattern: []byte("UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA-AAACABAAZGF0YQAAAAA"),
		n:       n,
		tail:    []byte(`", "mediatype": "audio/x-wav"}], "analysis": []}`),
	}
}

func TestBoundedMemoryUnsigned(t *testing.T) {
	g := largeUnsigned(48 << 20)
	size := g.size()
	var m *Meta
	var err error
	start := time.Now()
	a := allocs(func() { m, err = Inspect(g, false, testLimit) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d MiB inspected in %v, %d KiB allocated", size>>20, time.Since(start).Round(time.Millisecond), a>>10)
	if m.Size != size || m.DialogCount != 1 || m.PartyCount != 2 {
		t.Errorf("Meta %+v", m)
	}
	if a > boundedAlloc {
		t.Errorf("allocated %d bytes for a %d-byte body, want under %d", a, size, boundedAlloc)
	}
}

func TestBoundedMemorySigned(t *testing.T) {
	inner := largeUnsigned(36 << 20)
	g := io.MultiReader(
		strings.NewReader(`{"signatures": [{"header": {"kid": "k1"}, "signature": "AAAA"}], "payload": "`),
		&b64gen{src: inner},
		strings.NewReader(`"}`),
	)
	var m *Meta
	var err error
	start := time.Now()
	a := allocs(func() { m, err = Inspect(g, false, testLimit) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d MiB inspected in %v, %d KiB allocated", m.Size>>20, time.Since(start).Round(time.Millisecond), a>>10)
	if m.Form != vocab.FormSigned || m.UUID != "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41" || m.DialogCount != 1 || m.PartyCount != 2 || m.Size < 48<<20 {
		t.Errorf("Meta %+v", m)
	}
	if a > boundedAlloc {
		t.Errorf("allocated %d bytes for a %d-byte body, want under %d", a, m.Size, boundedAlloc)
	}
}

// gzipBomb streams the gzip of prefix followed by n bytes of '0' through a
// pipe, so no bomb is ever written to disk or held in memory. stop ends
// the writer and waits for it.
func gzipBomb(t *testing.T, prefix string, n int64) (r io.Reader, stop func()) {
	pr, pw := io.Pipe()
	// BestSpeed makes the same bomb (about 1000:1) four times faster.
	zw, err := gzip.NewWriterLevel(pw, gzip.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("0"), 64<<10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := zw.Write([]byte(prefix)); err != nil {
			pw.CloseWithError(err)
			return
		}
		for written := int64(0); written < n; written += int64(len(chunk)) {
			if _, err := zw.Write(chunk); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(zw.Close())
	}()
	return pr, func() {
		pr.Close()
		<-done
	}
}

func TestGzipBomb(t *testing.T) {
	r, stop := gzipBomb(t, `{"uuid": "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41", "dialog": [{"body": "`, 2<<30)
	defer stop()
	counted := &countReader{r: r}
	var err error
	start := time.Now()
	a := allocs(func() { _, err = Inspect(counted, true, testLimit) })
	elapsed := time.Since(start)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("error %v, want ErrTooLarge", err)
	}
	t.Logf("2 GiB bomb refused in %v after reading %d KiB of it, %d KiB allocated (its gzip writer included)", elapsed.Round(time.Millisecond), counted.n>>10, a>>10)
	// 64 MiB of output is about 64 KiB of this gzip; the whole bomb is 2 MiB.
	if counted.n > 256<<10 {
		t.Errorf("read %d bytes of the bomb: it was inflated past the limit", counted.n)
	}
	if elapsed > time.Minute {
		t.Errorf("took %v", elapsed)
	}
	if a > 8<<20 {
		t.Errorf("allocated %d bytes", a)
	}
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func TestRawLimit(t *testing.T) {
	const limit = 1 << 20
	body := func(size int64) *gen {
		head := []byte(`{"uuid": "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41", "x": "`)
		tail := []byte(`"}`)
		return &gen{head: head, pattern: []byte("a"), n: size - int64(len(head)+len(tail)), tail: tail}
	}
	m, err := Inspect(body(limit), false, limit)
	if err != nil || m.Size != limit {
		t.Fatalf("a body of exactly the limit: %v %v", m, err)
	}
	if _, err := Inspect(body(limit+1), false, limit); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a body of limit+1 bytes: %v, want ErrTooLarge", err)
	}
	// The compressed body counts too.
	if _, err := Inspect(bytes.NewReader(gzipBytes(t, []byte(`{"uuid": "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41"}`))), true, 20); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a gzip body over the limit: %v, want ErrTooLarge", err)
	}
	// So does the inflated one.
	g := body(limit + 1)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	io.Copy(zw, g)
	zw.Close()
	if _, err := Inspect(&buf, true, limit); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a gzip body inflating to limit+1 bytes: %v, want ErrTooLarge", err)
	}
}

func TestNesting(t *testing.T) {
	const deep = 100000
	for _, tc := range []struct{ name, body string }{
		{"arrays", strings.Repeat("[", deep)},
		{"arrays in a vCon", `{"uuid": "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41", "x": ` + strings.Repeat("[", deep)},
		{"objects", `{"uuid": "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41", "x": ` + strings.Repeat(`{"a":`, deep)},
		{"mixed", strings.Repeat(`{"parties":[`, deep)},
		{"parties", `{"parties": [` + strings.Repeat(`{"tel": [`, deep)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := inspectBytes(t, []byte(tc.body), false)
			if r := invalidReason(t, err); !strings.HasPrefix(r, "nesting deeper than 512 levels at byte") {
				t.Errorf("reason %q", r)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
	// 512 levels are fine, 513 are not.
	nest := func(levels int) []byte {
		return []byte(`{"uuid": "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41", "x": ` + strings.Repeat("[", levels-1) + strings.Repeat("]", levels-1) + `}`)
	}
	if _, err := inspectBytes(t, nest(512), false); err != nil {
		t.Errorf("512 levels: %v", err)
	}
	if _, err := inspectBytes(t, nest(513), false); err == nil {
		t.Errorf("513 levels accepted")
	}
}

// vconOfSize builds an unsigned vCon of about size bytes, half transcript
// segments (many small values) and half an inline recording.
func vconOfSize(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"vcon": "0.4.0", "uuid": "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41", "created_at": "2025-05-14T09:30:12.250Z", "subject": "Benchmark call",
  "parties": [{"tel": "+15555550142", "name": "Priya Nandakumar"}, {"tel": "tel:+15555550199", "name": "Tomasz Wielgus", "mailto": "tomasz@example.com"}],
  "dialog": [{"type": "recording", "start": "2025-05-14T09:30:12.250Z", "duration": 31.5, "parties": [0, 1], "encoding": "base64url", "body": "`)
	b.WriteString(strings.Repeat("UklGRiQAAABXQVZF", size/2/16))
	b.WriteString(`"}],
  "analysis": [{"type": "transcript", "dialog": 0, "encoding": "json", "body": [`)
	for i := 0; b.Len() < size-100; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"speaker": %d, "start": %d.25, "text": "Segment %d: could you confirm the delivery address, please?", "confidence": 0.97}`, i%2, i, i)
	}
	b.WriteString("]}]}\n")
	return b.Bytes()
}

func BenchmarkInspect(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20} {
		doc := vconOfSize(size)
		if _, err := inspectBytes(b, doc, false); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Inspect(bytes.NewReader(doc), false, testLimit); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

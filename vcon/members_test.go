package vcon

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestDuplicateMembers: a member the package reads, repeated in one
// object, refuses the vCon with its path named, in all three forms and in
// a signed vCon's payload; the encoding/json reading (ref_test.go) refuses
// the same bodies. Members not read may repeat.
func TestDuplicateMembers(t *testing.T) {
	const u = "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41"
	const u2 = "3d9c1e7a-52b4-4f08-a6c3-0b9e2d714f5c"
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	signed := func(payload, header string) string {
		return `{"payload": "` + b64(payload) + `", "signatures": [{"protected": "e30", "header": ` + header + `, "signature": "AAAA"}]}`
	}
	inner := `{"uuid": "` + u2 + `", "parties": [{"tel": "+15555550101"}]}`
	hdr := `{"uuid": "` + u + `"}`
	for _, tc := range []struct{ name, body, member string }{
		{"uuid", `{"uuid": "` + u + `", "uuid": "` + u2 + `"}`, "uuid"},
		{"uuid then null", `{"uuid": "` + u + `", "uuid": null}`, "uuid"},
		{"uuid escaped", `{"uuid": "` + u + `", "\u0075uid": "` + u2 + `"}`, "uuid"},
		{"vcon", `{"vcon": "0.4.0", "uuid": "` + u + `", "vcon": "0.0.1"}`, "vcon"},
		{"subject", `{"uuid": "` + u + `", "subject": "a", "subject": "b"}`, "subject"},
		{"parties", `{"uuid": "` + u + `", "parties": [], "parties": []}`, "parties"},
		{"party tel", `{"uuid": "` + u + `", "parties": [{}, {"tel": "+15555550100", "name": "A", "tel": "+15555550199"}]}`, "parties[1].tel"},
		{"signatures", `{"payload": "` + b64(inner) + `", "signatures": [], "signatures": []}`, "signatures"},
		{"payload", `{"payload": "` + b64(inner) + `", "signatures": [{"header": ` + hdr + `}], "payload": "e30"}`, "payload"},
		{"signature header", `{"payload": "", "signatures": [{"header": {}}, {"header": ` + hdr + `, "header": {}}]}`, "signatures[1].header"},
		{"signature value", `{"payload": "e30", "signatures": [{"header": ` + hdr + `, "signature": "a", "signature": "b"}]}`, "signatures[0].signature"},
		{"flattened signature", `{"payload": "e30", "header": ` + hdr + `, "signature": "a", "signature": "b"}`, "signature"},
		{"signature header uuid", signed(inner, `{"uuid": "`+u+`", "kid": "k", "uuid": "`+u2+`"}`), "signatures[0].header.uuid"},
		{"payload uuid", signed(`{"uuid": "`+u2+`", "uuid": "`+u+`"}`, `{}`), "uuid in the payload"},
		{"payload uuid, header uuid", signed(`{"uuid": "`+u2+`", "uuid": "`+u+`"}`, hdr), "uuid in the payload"},
		{"payload party", signed(`{"uuid": "`+u2+`", "parties": [{"name": "A", "name": "B"}]}`, hdr), "parties[0].name in the payload"},
		{"unprotected", `{"ciphertext": "", "recipients": [], "unprotected": {"uuid": "` + u + `"}, "unprotected": {"uuid": "` + u2 + `"}}`, "unprotected"},
		{"unprotected uuid", `{"ciphertext": "", "recipients": [], "unprotected": {"uuid": "` + u + `", "enc": "A256GCM", "uuid": "` + u2 + `"}}`, "unprotected.uuid"},
		{"ciphertext", `{"ciphertext": "", "recipients": [], "ciphertext": "", "unprotected": {"uuid": "` + u + `"}}`, "ciphertext"},
		{"first duplicate named", `{"uuid": "` + u + `", "parties": [{"mailto": "a", "mailto": "b"}], "uuid": "` + u + `"}`, "parties[0].mailto"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, gz := range []bool{false, true} {
				body := []byte(tc.body)
				if gz {
					body = gzipBytes(t, body)
				}
				_, err := inspectBytes(t, body, gz)
				want := "duplicate member " + tc.member + ": it appears twice in one object, and JSON parsers disagree on which one counts; send it once"
				if r := invalidReason(t, err); r != want {
					t.Errorf("gzip %v: reason %q, want %q", gz, r, want)
				}
			}
			if _, why := refInspect([]byte(tc.body), testLimit); why != "invalid" {
				t.Errorf("the encoding/json reading says %q, want invalid", why)
			}
		})
	}
	// Not JSON wins over a duplicate: the body is called what it is first.
	_, err := inspectBytes(t, []byte(`{"uuid": "`+u+`", "uuid": "`+u+`", "x": 01}`), false)
	if r := invalidReason(t, err); !strings.HasPrefix(r, "not valid JSON: number with a leading zero") {
		t.Errorf("a duplicate in a body that is not JSON: %q", r)
	}
	// Repeats of members not read, and in objects not read, are kept.
	for _, body := range []string{
		`{"uuid": "` + u + `", "dialog": [{"parties": 0, "parties": 1}], "analysis": [{"vendor": "a", "vendor": "b"}]}`,
		`{"uuid": "` + u + `", "parties": [{"tel": "+15555550100", "meta": {"tel": 1, "tel": 2}}], "attachments": {"uuid": 1, "uuid": 2}}`,
		signed(inner, `{"uuid": "`+u+`", "kid": "a", "kid": "b"}`),
		`{"ciphertext": "", "recipients": [{"header": {"uuid": 1, "uuid": 2}}], "unprotected": {"uuid": "` + u + `"}}`,
		// A payload of an unsigned vCon is not read for it.
		`{"uuid": "` + u + `", "payload": "` + b64(`{"uuid": 1, "uuid": 2}`) + `"}`,
	} {
		m, err := inspectBytes(t, []byte(body), false)
		if err != nil {
			t.Errorf("%s: %v", body, err)
			continue
		}
		if ref, why := refInspect([]byte(body), testLimit); why != "" {
			t.Errorf("%s: the encoding/json reading refuses it: %s", body, why)
		} else if d := diffMeta(m, ref); d != "" {
			t.Errorf("%s: differs from the encoding/json reading: %s", body, d)
		}
	}
}

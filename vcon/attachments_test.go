package vcon

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/vcon-server/vcon-server/vcon/lawfulbasis"
)

const lbUUID = "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41"

// lbAttachment is a lawful-basis attachment with its purpose last, after
// its body, as a producer may write it.
func lbAttachment(party int, grants string) string {
	return fmt.Sprintf(`{"party": %d, "dialog": 0, "encoding": "json", "start": "2025-01-02T12:15:30Z",
	 "body": {"lawful_basis": "consent", "expiration": "2027-01-02T12:00:00Z", "purpose_grants": [%s]},
	 "purpose": "lawful_basis"}`, party, grants)
}

func grant(purpose string, ok bool) string {
	return fmt.Sprintf(`{"purpose": %q, "granted": %v, "granted_at": "2025-01-02T12:15:30Z"}`, purpose, ok)
}

// lbVCon puts the attachments first, before the parties their indexes
// name: the check waits for the end of the document.
func lbVCon(atts ...string) string {
	return `{"attachments": [` + strings.Join(atts, ", ") + `], "vcon": "0.4.0", "uuid": "` + lbUUID + `",
	 "parties": [{"tel": "+15555550100"}, {"tel": "+15555550101"}], "dialog": [{}]}`
}

func TestLawfulBasisUnsigned(t *testing.T) {
	recording := `{"purpose": "recording", "encoding": "base64url", "body": "` + strings.Repeat("A", 200<<10) + `"}`
	body := lbVCon(`{"purpose": "transcript", "body": {"text": "hello"}}`, recording,
		lbAttachment(1, grant("customer_service", true)+", "+grant("marketing", false)))
	// Read a byte at a time too: the attachment's bytes cross every
	// refill of the scanner's buffer.
	for name, rd := range map[string]io.Reader{"whole": strings.NewReader(body), "one byte": iotest.OneByteReader(strings.NewReader(body))} {
		m, err := Inspect(rd, false, testLimit)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lb := m.LawfulBasis
		if m.LawfulBasisErr != nil || lb.Basis != "consent" || lb.Expires == nil || fmt.Sprint(lb.Granted, lb.Refused) != "[customer_service] [marketing]" {
			t.Errorf("%s: %+v %v", name, lb, m.LawfulBasisErr)
		}
	}
}

func TestLawfulBasisNone(t *testing.T) {
	m, err := inspectBytes(t, []byte(`{"uuid": "`+lbUUID+`", "attachments": [{"purpose": "notes", "body": "x"}, 3, "y"]}`), false)
	if err != nil {
		t.Fatal(err)
	}
	if m.LawfulBasis.Basis != lawfulbasis.None || m.LawfulBasisErr != nil {
		t.Errorf("%+v %v", m.LawfulBasis, m.LawfulBasisErr)
	}
}

func TestLawfulBasisSignedAndEncrypted(t *testing.T) {
	inner := lbVCon(lbAttachment(0, grant("analytics", true)))
	signed := `{"payload": "` + base64.RawURLEncoding.EncodeToString([]byte(inner)) + `", "signatures": [{"protected": "e30", "signature": "AAAA"}]}`
	m, err := inspectBytes(t, []byte(signed), false)
	if err != nil {
		t.Fatal(err)
	}
	if m.LawfulBasis.Basis != "consent" || fmt.Sprint(m.LawfulBasis.Granted) != "[analytics]" {
		t.Errorf("signed: %+v", m.LawfulBasis)
	}
	// A signed vCon whose payload cannot be read, and an encrypted one:
	// unknown, which is no refusal.
	for name, body := range map[string]string{
		"signed, payload unreadable": `{"payload": "!!!", "signatures": [{"header": {"uuid": "` + lbUUID + `"}}]}`,
		"encrypted":                  `{"ciphertext": "AAAA", "recipients": [], "unprotected": {"uuid": "` + lbUUID + `"}}`,
	} {
		m, err := inspectBytes(t, []byte(body), false)
		if err != nil {
			t.Fatal(err)
		}
		if m.LawfulBasis.Basis != lawfulbasis.Unknown || m.LawfulBasisErr != nil {
			t.Errorf("%s: %+v %v", name, m.LawfulBasis, m.LawfulBasisErr)
		}
	}
}

func TestLawfulBasisMalformed(t *testing.T) {
	big := `{"purpose": "lawful_basis", "pad": "` + strings.Repeat("a", lawfulbasis.MaxAttachmentSize) + `"}`
	many := make([]string, lawfulbasis.MaxAttachments+1)
	for i := range many {
		many[i] = lbAttachment(0, grant("a", true))
	}
	for _, c := range []struct{ name, body, want string }{
		{"a party out of range", lbVCon(lbAttachment(2, "")), "attachments[0]: party is 2, but the vCon has 2 parties"},
		{"a purpose not a word", lbVCon(`{"purpose": "x"}`, lbAttachment(0, grant("Marketing", true))), "attachments[1]: body.purpose_grants[0].purpose must be"},
		{"too large", lbVCon(big), "attachments[0]: the attachment is over 64 KiB"},
		{"too many", lbVCon(many...), "more than 16 lawful_basis attachments"},
	} {
		m, err := inspectBytes(t, []byte(c.body), false)
		if err != nil {
			t.Fatalf("%s: a malformed attachment is the tenant's to refuse, not Inspect's: %v", c.name, err)
		}
		var e *lawfulbasis.Error
		if !errors.As(m.LawfulBasisErr, &e) || !strings.HasPrefix(e.Reason, c.want) || m.LawfulBasis.Basis != lawfulbasis.Malformed {
			t.Errorf("%s: %+v %v, want %q", c.name, m.LawfulBasis, m.LawfulBasisErr, c.want)
		}
	}
}

// A member the walk reads, repeated, refuses the vCon (members.go).
func TestLawfulBasisDuplicates(t *testing.T) {
	for _, body := range []string{
		`{"uuid": "` + lbUUID + `", "attachments": [], "attachments": []}`,
		`{"uuid": "` + lbUUID + `", "attachments": [{"purpose": "a", "purpose": "lawful_basis"}]}`,
	} {
		if _, err := inspectBytes(t, []byte(body), false); err == nil || !strings.Contains(err.Error(), "duplicate member") {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// TestLawfulBasisVconLib: test/testdata/vcons/vcon-lib-lawful-basis.vcon
// has the shape vcon-lib's Vcon.build_new and its lawful-basis helper
// (LawfulBasisExtension.create_lawful_basis_attachment, added with
// add_attachment) write: no "vcon" member, times as Python's isoformat
// writes them (+00:00, microseconds), and the attachment named by its
// pre-0.4 "type", with neither party, dialog nor start. Its basis is read:
// grants and refusals, the expiry or none; a basis outside the draft's six
// is malformed as in any attachment; a "type" beside a purpose is only a
// type.
func TestLawfulBasisVconLib(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(projectDir, "vcon-lib-lawful-basis.vcon"))
	if err != nil {
		t.Fatal(err)
	}
	lib := string(b)
	m, err := inspectBytes(t, b, false)
	if err != nil {
		t.Fatal(err)
	}
	lb := m.LawfulBasis
	if m.LawfulBasisErr != nil || lb.Basis != "consent" || lb.Expires == nil || !lb.Expires.Equal(time.Date(2036, 5, 1, 9, 0, 0, 0, time.UTC)) ||
		fmt.Sprint(lb.Granted, lb.Refused) != "[analysis recording] [marketing]" {
		t.Errorf("vcon-lib's attachment: %+v %v", lb, m.LawfulBasisErr)
	}
	variant := func(old, new string) *Meta {
		t.Helper()
		m, err := inspectBytes(t, []byte(strings.Replace(lib, old, new, 1)), false)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := variant(`"expiration": "2036-05-01T09:00:00+00:00"`, `"expiration": null`); m.LawfulBasisErr != nil || m.LawfulBasis.Expires != nil {
		t.Errorf("no expiration: %+v %v", m.LawfulBasis, m.LawfulBasisErr)
	}
	if m := variant(`"consent"`, `"because"`); m.LawfulBasis.Basis != lawfulbasis.Malformed || m.LawfulBasisErr == nil ||
		!strings.Contains(m.LawfulBasisErr.Error(), "attachments[0]: body.lawful_basis must be one of") {
		t.Errorf("a basis outside the six: %+v %v", m.LawfulBasis, m.LawfulBasisErr)
	}
	if m := variant(`"type": "lawful_basis"`, `"type": "lawful_basis", "purpose": "notes"`); m.LawfulBasis.Basis != lawfulbasis.None {
		t.Errorf("purpose notes, type lawful_basis: %+v", m.LawfulBasis)
	}
}

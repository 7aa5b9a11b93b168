package lawfulbasis

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var (
	t0   = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	skew = 5 * time.Minute
)

func grants(gs ...any) []Grant {
	var out []Grant
	for i := 0; i < len(gs); i += 2 {
		out = append(out, Grant{Purpose: gs[i].(string), Granted: gs[i+1].(bool), At: t0.Add(-time.Hour)})
	}
	return out
}

func decide(t *testing.T, s Summary, purpose string, now time.Time) (bool, string) {
	t.Helper()
	return s.Decide(purpose, now, skew)
}

// Granular Permission Evaluation, 1: "Check for applicable lawful basis
// attachments": none at all denies.
func TestDecideNoAttachment(t *testing.T) {
	if ok, why := decide(t, Summarize(nil), "customer_service", t0); ok || why != WhyMissing {
		t.Errorf("%v %s", ok, why)
	}
	// Unreadable (encrypted) and malformed bases deny too, each saying so.
	for basis, want := range map[string]string{Unknown: WhyUnknown, Malformed: WhyMalformed} {
		if ok, why := decide(t, Summary{Basis: basis, Granted: []string{"customer_service"}}, "customer_service", t0); ok || why != want {
			t.Errorf("%s: %v %s", basis, ok, why)
		}
	}
}

// Granular Permission Evaluation, 2: "Evaluate all relevant purpose
// grants for the specific purpose": grants of other purposes do not
// count, and every attachment's grants do.
func TestDecideEvaluatesEveryGrantForThePurpose(t *testing.T) {
	s := Summarize([]Attachment{
		{Basis: "consent", Grants: grants("recording", true, "marketing", true)},
		{Basis: "consent", Grants: grants("analytics", true, "marketing", false)},
	})
	for purpose, want := range map[string]bool{"recording": true, "analytics": true, "marketing": false} {
		if ok, why := decide(t, s, purpose, t0); ok != want {
			t.Errorf("%s: %v %s", purpose, ok, why)
		}
	}
}

// Granular Permission Evaluation, 3: "Apply most restrictive permission
// when multiple grants apply": one false among trues refuses, in either
// order, in one attachment or across two.
func TestDecideMostRestrictive(t *testing.T) {
	for _, atts := range [][]Attachment{
		{{Basis: "consent", Grants: grants("marketing", true, "marketing", false)}},
		{{Basis: "consent", Grants: grants("marketing", false, "marketing", true)}},
		{{Basis: "consent", Grants: grants("marketing", true)}, {Basis: "contract", Grants: grants("marketing", false)}},
	} {
		s := Summarize(atts)
		if ok, why := decide(t, s, "marketing", t0); ok || why != WhyRefused {
			t.Errorf("%+v: %v %s", atts, ok, why)
		}
		if len(s.Granted) != 0 || fmt.Sprint(s.Refused) != "[marketing]" {
			t.Errorf("granted %v, refused %v", s.Granted, s.Refused)
		}
	}
	// The earliest expiration of two attachments holds for both.
	early, late := t0.Add(time.Hour), t0.Add(48*time.Hour)
	s := Summarize([]Attachment{{Basis: "consent", Expiration: &late, Grants: grants("a", true)}, {Basis: "contract", Expiration: &early}})
	if !s.Expires.Equal(early) || s.Basis != "consent,contract" {
		t.Errorf("%+v", s)
	}
}

// Granular Permission Evaluation, 4: "Deny processing if no valid
// permission exists or if it is explicitly denied".
func TestDecideDeniesWithoutPermission(t *testing.T) {
	s := Summarize([]Attachment{{Basis: "consent", Grants: grants("customer_service", true, "marketing", false)}})
	if ok, why := decide(t, s, "ai_training", t0); ok || why != WhyNoGrant {
		t.Errorf("no grant: %v %s", ok, why)
	}
	if ok, why := decide(t, s, "marketing", t0); ok || why != WhyRefused {
		t.Errorf("denied: %v %s", ok, why)
	}
	if ok, why := decide(t, s, "customer_service", t0); !ok || why != WhyGranted {
		t.Errorf("granted: %v %s", ok, why)
	}
	// An attachment with no grants at all permits nothing.
	if ok, _ := decide(t, Summarize([]Attachment{{Basis: "legal_obligation"}}), "customer_service", t0); ok {
		t.Error("no grants allowed a purpose")
	}
}

// Temporal Validity, 1 and 3: "Compare current time against expiration"
// and "Reject processing if lawful basis has expired".
func TestDecideExpired(t *testing.T) {
	exp := t0.Add(-time.Hour)
	s := Summarize([]Attachment{{Basis: "consent", Expiration: &exp, Grants: grants("customer_service", true)}})
	if ok, why := decide(t, s, "customer_service", t0); ok || why != WhyExpired {
		t.Errorf("%v %s", ok, why)
	}
	if ok, _ := decide(t, s, "customer_service", exp.Add(-time.Second)); !ok {
		t.Error("denied before the expiration")
	}
}

// Temporal Validity, 2: "Account for reasonable clock skew": within skew
// after the expiration still allows; past it denies.
func TestDecideSkew(t *testing.T) {
	exp := t0
	s := Summarize([]Attachment{{Basis: "consent", Expiration: &exp, Grants: grants("customer_service", true)}})
	if ok, _ := decide(t, s, "customer_service", exp.Add(skew)); !ok {
		t.Error("denied within the skew")
	}
	if ok, why := decide(t, s, "customer_service", exp.Add(skew+time.Nanosecond)); ok || why != WhyExpired {
		t.Errorf("past the skew: %v %s", ok, why)
	}
	if ok, _ := s.Decide("customer_service", exp.Add(time.Second), 0); ok {
		t.Error("skew 0 allowed after the expiration")
	}
}

// Temporal Validity, 4: "Support null expiration for indefinite
// validity".
func TestDecideNullExpiration(t *testing.T) {
	a, err := Parse([]byte(attachment(fmt.Sprintf(body, ""))))
	if err != nil {
		t.Fatal(err)
	}
	s := Summarize([]Attachment{a})
	if s.Expires != nil {
		t.Fatal(s.Expires)
	}
	if ok, why := decide(t, s, "customer_service", t0.AddDate(100, 0, 0)); !ok {
		t.Errorf("a century on: %s", why)
	}
}

// Reference Validation, 1 and 2, and Content Hash Validation, 3 ("Reject
// processing if hashes do not match"), are Parse's and CheckRefs' (see
// TestCheckRefs and TestContentHash); the draft's own example decides as
// it reads.
func TestDecideDraftExample(t *testing.T) {
	a, err := Parse([]byte(fmt.Sprintf(draftExample, "")))
	if err != nil {
		t.Fatal(err)
	}
	s := Summarize([]Attachment{a})
	before := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	for purpose, want := range map[string]string{"recording": WhyGranted, "transcription": WhyGranted, "sentiment_analysis": WhyRefused, "marketing": WhyNoGrant} {
		if _, why := decide(t, s, purpose, before); why != want {
			t.Errorf("%s: %s, want %s", purpose, why, want)
		}
	}
	if _, why := decide(t, s, "recording", time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)); why != WhyExpired {
		t.Errorf("after 2026-01-02: %s", why)
	}
	if !strings.Contains(strings.Join(s.Granted, " "), "recording transcription") {
		t.Errorf("%v", s.Granted)
	}
}

package server_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// boundKey creates a tenant key reading for purposes.
func boundKey(t *testing.T, e *testenv.Env, tenant string, purposes ...string) testenv.Key {
	t.Helper()
	args := []string{"key", "create", "--tenant", tenant, "--label", "for-" + strings.Join(purposes, "-"), "--scope", "read"}
	for _, p := range purposes {
		args = append(args, "--purpose", p)
	}
	var k testenv.Key
	if err := json.Unmarshal([]byte(e.CLI(args...)), &k); err != nil {
		t.Fatal(err)
	}
	return k
}

type denial struct {
	Error, Purpose, Reason string
}

type listing struct {
	UUIDs    []string `json:"uuids"`
	Withheld *int     `json:"withheld"`
	Complete bool     `json:"complete"`
}

// TestPurposesAtTheDoor: over real TLS, a vCon granting customer_service
// and refusing marketing. Under enforce a customer_service key reads it
// byte for byte, a marketing key gets 451 naming the purpose, a key with
// both must name one (400) and may not name another (403); a listing and
// a search by party with the marketing key leave it out and count it;
// require refuses a key bound to none (403). Each decision is in the
// audit log, which still verifies.
func TestPurposesAtTheDoor(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	writer := e.NewKey(tenant, "write", "read")
	deleter := e.NewKey(tenant, "delete")
	cs := boundKey(t, e, tenant, "customer_service")
	mk := boundKey(t, e, tenant, "marketing")
	both := boundKey(t, e, tenant, "customer_service", "marketing")
	if len(both.Purposes) != 2 {
		t.Fatalf("key create prints purposes %v", both.Purposes)
	}
	e.CLI("tenant", "set-search", tenant, "parties")
	e.CLI("tenant", "set-lawful-basis", "acme", "enforce")

	u := ids.NewRandom().String()
	body := lawfulVcon(u, goodBasis)
	plain := ids.NewRandom().String()
	for _, b := range [][]byte{body, []byte(`{"vcon":"0.4.0","uuid":"` + plain + `","parties":[{"tel":"+15555550100"}]}`)} {
		if r := e.Do("POST", "/vcons", writer.Token, b, "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("store: %d %s", r.Status, r.Body)
		}
	}
	e.Daemon.IndexSearch(t.Context())

	if r := e.Do("GET", "/vcons/"+u, cs.Token, nil); r.Status != 200 || string(r.Body) != string(body) {
		t.Errorf("customer_service read: %d, %d bytes of %d", r.Status, len(r.Body), len(body))
	}
	if r := e.Do("GET", "/vcons/"+u+"/versions", cs.Token, nil); r.Status != 200 {
		t.Errorf("customer_service versions: %d %s", r.Status, r.Body)
	}
	for _, c := range []struct {
		path, token, why string
		header           []string
	}{
		{"/vcons/" + u, mk.Token, "purpose_refused", nil},
		{"/vcons/" + u + "/versions", mk.Token, "purpose_refused", nil},
		{"/vcons/" + u, both.Token, "purpose_refused", []string{"Vcon-Purpose", "marketing"}},
		{"/vcons/" + plain, cs.Token, "no_lawful_basis", nil},
	} {
		r := e.Do("GET", c.path, c.token, nil, c.header...)
		var d denial
		r.JSON(t, &d)
		if r.Status != 451 || d.Reason != c.why || !strings.Contains(d.Error, d.Purpose) || d.Purpose == "" {
			t.Errorf("%s: %d %+v, want 451 %s", c.path, r.Status, d, c.why)
		}
	}
	// An expired basis denies; one expired less than [lawful_basis] skew
	// (300 s by default) ago still holds.
	expired, recent := ids.NewRandom().String(), ids.NewRandom().String()
	soon := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	for uuid, at := range map[string]string{expired: "2020-01-02T12:00:00Z", recent: soon} {
		b := lawfulVcon(uuid, strings.Replace(goodBasis, "2036-01-02T12:00:00Z", at, 1))
		if r := e.Do("POST", "/vcons", writer.Token, b, "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("store: %d %s", r.Status, r.Body)
		}
	}
	if r := e.Do("GET", "/vcons/"+expired, cs.Token, nil); r.Status != 451 || !strings.Contains(string(r.Body), `"reason":"lawful_basis_expired"`) {
		t.Errorf("expired: %d %s", r.Status, r.Body)
	}
	if r := e.Do("GET", "/vcons/"+recent, cs.Token, nil); r.Status != 200 {
		t.Errorf("expired within the skew: %d %s", r.Status, r.Body)
	}
	for _, u := range []string{expired, recent} {
		if r := e.Do("DELETE", "/vcons/"+u, deleter.Token, nil); r.Status != 204 {
			t.Fatalf("delete: %d", r.Status)
		}
	}

	// The lawful-basis route stays readable: it is how a caller learns why.
	if r := e.Do("GET", "/vcons/"+u+"/lawful-basis", mk.Token, nil); r.Status != 200 {
		t.Errorf("lawful-basis with the marketing key: %d", r.Status)
	}
	// A key with both must name one, and only one of its own.
	if r := e.Do("GET", "/vcons/"+u, both.Token, nil); r.Status != 400 || !strings.Contains(string(r.Body), "Vcon-Purpose") {
		t.Errorf("both, no header: %d %s", r.Status, r.Body)
	}
	if r := e.Do("GET", "/vcons/"+u, both.Token, nil, "Vcon-Purpose", "customer_service"); r.Status != 200 || string(r.Body) != string(body) {
		t.Errorf("both, customer_service: %d", r.Status)
	}
	if r := e.Do("GET", "/vcons/"+u, cs.Token, nil, "Vcon-Purpose", "analytics"); r.Status != 403 {
		t.Errorf("a purpose the key lacks: %d %s", r.Status, r.Body)
	}

	// Listings and searches leave out what the purpose may not see.
	list := func(token, query string) listing {
		t.Helper()
		r := e.Do("GET", "/vcons"+query, token, nil)
		if r.Status != 200 {
			t.Fatalf("GET /vcons%s: %d %s", query, r.Status, r.Body)
		}
		var l listing
		r.JSON(t, &l)
		return l
	}
	for _, q := range []string{"", "?tel=%2B15555550100"} {
		if l := list(mk.Token, q); len(l.UUIDs) != 0 || l.Withheld == nil || *l.Withheld != 2 {
			t.Errorf("marketing %q: %v withheld %v", q, l.UUIDs, l.Withheld)
		}
		if l := list(cs.Token, q); len(l.UUIDs) != 1 || l.UUIDs[0] != u || l.Withheld == nil || *l.Withheld != 1 {
			t.Errorf("customer_service %q: %v withheld %v", q, l.UUIDs, l.Withheld)
		}
		if l := list(writer.Token, q); len(l.UUIDs) != 2 || l.Withheld != nil {
			t.Errorf("a key bound to none under enforce %q: %v withheld %v", q, l.UUIDs, l.Withheld)
		}
	}

	// Require refuses a key bound to none; a bound key reads on.
	e.CLI("tenant", "set-lawful-basis", "acme", "require")
	if r := e.Do("GET", "/vcons/"+u, writer.Token, nil); r.Status != 403 || !strings.Contains(string(r.Body), "--purpose") {
		t.Errorf("require, unbound: %d %s", r.Status, r.Body)
	}
	if r := e.Do("GET", "/vcons", writer.Token, nil); r.Status != 403 {
		t.Errorf("require, unbound listing: %d", r.Status)
	}
	if r := e.Do("GET", "/vcons/"+u, cs.Token, nil); r.Status != 200 {
		t.Errorf("require, customer_service: %d", r.Status)
	}
	// Off reads as before the modes: no header needed, nothing withheld.
	e.CLI("tenant", "set-lawful-basis", "acme", "off")
	if r := e.Do("GET", "/vcons/"+u, mk.Token, nil); r.Status != 200 {
		t.Errorf("off, marketing: %d", r.Status)
	}

	audit := e.CLI("audit", "export", "--tenant", "acme")
	for _, want := range []string{
		`"action":"read purpose=customer_service","target":"` + u + `","status":200`,
		`"action":"read purpose=marketing denied=purpose_refused","target":"` + u + `","status":451`,
		`"action":"list purpose=marketing withheld=2","status":200`,
		`"action":"read","target":"` + u + `","status":400`,
		`"action":"read","target":"` + u + `","status":403`,
	} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit log lacks %s", want)
		}
	}
	e.Stop()
	if out, errOut, code := e.TryCLI("audit", "verify", "--tenant", "acme"); code != 0 {
		t.Errorf("audit verify: exit %d %s%s", code, out, errOut)
	}
}

// TestVconLibPurposes: over real TLS, under enforce, a vCon of the shape
// vcon-lib's lawful-basis helper writes (test/testdata/vcons) is stored
// and decided as any other: a recording key reads it byte for byte, a
// marketing key is refused by its grant, a training key finds no grant.
func TestVconLibPurposes(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	writer := e.NewKey(tenant, "write")
	e.CLI("tenant", "set-lawful-basis", "acme", "enforce")
	body, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(t), "test", "testdata", "vcons", "vcon-lib-lawful-basis.vcon"))
	if err != nil {
		t.Fatal(err)
	}
	if r := e.Do("POST", "/vcons", writer.Token, body, "Content-Type", "application/vcon"); r.Status != 201 {
		t.Fatalf("store: %d %s", r.Status, r.Body)
	}
	const u = "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41"
	if r := e.Do("GET", "/vcons/"+u, boundKey(t, e, tenant, "recording").Token, nil); r.Status != 200 || !bytes.Equal(r.Body, body) {
		t.Errorf("recording read: %d, %d bytes of %d", r.Status, len(r.Body), len(body))
	}
	for purpose, why := range map[string]string{"marketing": "purpose_refused", "training": "no_grant_for_purpose"} {
		r := e.Do("GET", "/vcons/"+u, boundKey(t, e, tenant, purpose).Token, nil)
		var d denial
		r.JSON(t, &d)
		if r.Status != 451 || d.Purpose != purpose || d.Reason != why {
			t.Errorf("%s read: %d %s, want 451 %s", purpose, r.Status, r.Body, why)
		}
	}
}

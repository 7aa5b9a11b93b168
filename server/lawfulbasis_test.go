package server_test

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// lawfulVcon is an unsigned vCon of uuid whose lawful-basis attachment has
// body as its body.
func lawfulVcon(uuid, body string) []byte {
	return []byte(`{"vcon":"0.4.0","uuid":"` + uuid + `","parties":[{"tel":"+15555550100"}],"dialog":[],
		"attachments":[{"purpose":"lawful_basis","party":0,"dialog":0,"encoding":"json","body":` + body + `}]}`)
}

const goodBasis = `{"lawful_basis":"consent","expiration":"2036-01-02T12:00:00Z","purpose_grants":[
	{"purpose":"customer_service","granted":true,"granted_at":"2026-01-02T12:00:00Z"},
	{"purpose":"marketing","granted":false,"granted_at":"2026-01-02T12:00:00Z"}]}`

type lawfulAnswer struct {
	UUID     string   `json:"uuid"`
	Version  string   `json:"version"`
	Basis    *string  `json:"lawful_basis"`
	Expires  *string  `json:"expires_at"`
	Granted  []string `json:"granted"`
	Refused  []string `json:"refused"`
	Error    string   `json:"error"`
	StoredAt string   `json:"stored_at"`
}

// TestLawfulBasis: over real TLS, a vCon's lawful basis is read at store
// and answered by GET /vcons/{uuid}/lawful-basis; the tenant's mode off
// stores a malformed one, enforce refuses it with 422 and stores nothing,
// require also refuses a vCon without one; each mode is recorded.
func TestLawfulBasis(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	ops := e.OperatorKey()
	ct := []string{"Content-Type", "application/vcon"}
	get := func(u string) lawfulAnswer {
		t.Helper()
		r := e.Do("GET", "/vcons/"+u+"/lawful-basis", k.Token, nil)
		var a lawfulAnswer
		r.JSON(t, &a)
		if r.Status != 200 {
			t.Fatalf("GET lawful-basis: %d %s", r.Status, a.Error)
		}
		return a
	}

	// Off, the default: stored, and what it says is kept.
	u := ids.NewRandom().String()
	body := lawfulVcon(u, goodBasis)
	if r := e.Do("POST", "/vcons", k.Token, body, ct...); r.Status != 201 {
		t.Fatalf("store: %d", r.Status)
	}
	a := get(u)
	if a.UUID != u || a.Basis == nil || *a.Basis != "consent" || a.Expires == nil || *a.Expires != "2036-01-02T12:00:00Z" ||
		fmt.Sprint(a.Granted, a.Refused) != "[customer_service] [marketing]" {
		t.Errorf("%+v", a)
	}
	// The vCon still reads byte for byte.
	if r := e.Do("GET", "/vcons/"+u, k.Token, nil); r.Status != 200 || string(r.Body) != string(body) {
		t.Errorf("read: %d, %d bytes of %d", r.Status, len(r.Body), len(body))
	}
	// A withdrawal is a new version: the route follows the current one.
	withdrawn := strings.Replace(goodBasis, `"granted":true`, `"granted":false`, 1)
	if r := e.Do("PUT", "/vcons/"+u, k.Token, lawfulVcon(u, withdrawn), ct...); r.Status != 200 {
		t.Fatalf("replace: %d", r.Status)
	}
	if a := get(u); len(a.Granted) != 0 || fmt.Sprint(a.Refused) != "[customer_service marketing]" {
		t.Errorf("after the withdrawal: %+v", a)
	}
	// A vCon without one, a signed one (its payload read), an encrypted
	// one (unknown), and a malformed one under off.
	plain, signed, sealed, bad := ids.NewRandom().String(), ids.NewRandom().String(), ids.NewRandom().String(), ids.NewRandom().String()
	payload := base64.RawURLEncoding.EncodeToString(lawfulVcon(signed, goodBasis))
	malformed := strings.Replace(goodBasis, `"consent"`, `"because"`, 1)
	for _, b := range [][]byte{
		[]byte(`{"vcon":"0.4.0","uuid":"` + plain + `","parties":[]}`),
		[]byte(`{"payload":"` + payload + `","signatures":[{"protected":"e30","signature":"AAAA"}]}`),
		[]byte(`{"ciphertext":"AAAA","recipients":[],"unprotected":{"uuid":"` + sealed + `"}}`),
		lawfulVcon(bad, malformed),
	} {
		if r := e.Do("POST", "/vcons", k.Token, b, ct...); r.Status != 201 {
			t.Fatalf("store under off: %d %s", r.Status, r.Body)
		}
	}
	for uuid, want := range map[string]string{plain: "<nil>", signed: "consent", sealed: "unknown", bad: "malformed"} {
		a := get(uuid)
		got := "<nil>"
		if a.Basis != nil {
			got = *a.Basis
		}
		if got != want || a.Granted == nil || a.Refused == nil {
			t.Errorf("%s: %+v, want %s", want, a, want)
		}
	}
	// Unknown uuids answer 404 as a read does.
	for _, path := range []string{"/vcons/" + ids.NewRandom().String() + "/lawful-basis", "/vcons/not-a-uuid/lawful-basis"} {
		if r := e.Do("GET", path, k.Token, nil); r.Status != 404 {
			t.Errorf("%s: %d", path, r.Status)
		}
	}
	// Another tenant's key does not see it.
	other := e.NewKey(e.Tenant("globex"), "read")
	if r := e.Do("GET", "/vcons/"+u+"/lawful-basis", other.Token, nil); r.Status != 404 {
		t.Errorf("another tenant: %d", r.Status)
	}

	// Enforce, by the admin route: a malformed attachment is 422 with
	// the reason, and nothing is stored.
	r := e.Do("PUT", "/admin/tenants/"+tenant+"/lawful-basis", ops.Token, []byte(`{"lawful_basis":"enforce"}`), "Content-Type", "application/json")
	if r.Status != 200 || !strings.Contains(string(r.Body), `"lawful_basis":"enforce"`) {
		t.Fatalf("set enforce: %d %s", r.Status, r.Body)
	}
	before := e.Count("objects")
	fresh := ids.NewRandom().String()
	for _, c := range []struct{ method, path, uuid, body, want string }{
		{"POST", "/vcons", fresh, malformed, "attachments[0]: body.lawful_basis must be one of consent"},
		{"PUT", "/vcons/" + u, u, malformed, "attachments[0]: body.lawful_basis must be one of consent"},
		{"POST", "/vcons", fresh, `{"lawful_basis":"consent","expiration":null,"purpose_grants":[],"content_hash":{"algorithm":"sha-256","canonicalization":"jcs","value":"` + strings.Repeat("0", 64) + `"}}`, "attachments[0]: body.content_hash does not match"},
	} {
		r := e.Do(c.method, c.path, k.Token, lawfulVcon(c.uuid, c.body), ct...)
		var got lawfulAnswer
		r.JSON(t, &got)
		if r.Status != 422 || !strings.Contains(got.Error, "the tenant's lawful-basis mode is enforce: "+c.want) {
			t.Errorf("%s %s: %d %q", c.method, c.path, r.Status, got.Error)
		}
	}
	if after := e.Count("objects"); after != before {
		t.Errorf("objects: %d before the refusals, %d after", before, after)
	}
	if r := e.Do("GET", "/vcons/"+fresh, k.Token, nil); r.Status != 404 {
		t.Errorf("a refused vCon was stored: %d", r.Status)
	}
	if a := get(u); fmt.Sprint(a.Refused) != "[customer_service marketing]" {
		t.Errorf("a refused PUT changed the current version: %+v", a)
	}
	// Enforce takes a vCon without one, and a well-formed one.
	for _, b := range [][]byte{[]byte(`{"uuid":"` + ids.NewRandom().String() + `"}`), lawfulVcon(ids.NewRandom().String(), goodBasis)} {
		if r := e.Do("POST", "/vcons", k.Token, b, ct...); r.Status != 201 {
			t.Errorf("under enforce: %d %s", r.Status, r.Body)
		}
	}

	// Require, by the command line: a vCon without a basis, or with one
	// that cannot be read, is 422 too.
	if out := e.CLI("tenant", "set-lawful-basis", "acme", "require"); !strings.Contains(out, `"lawful_basis":"require"`) {
		t.Errorf("set require: %s", out)
	}
	if out := e.CLI("tenant", "show", "acme"); !strings.Contains(out, `"lawful_basis":"require"`) {
		t.Errorf("tenant show: %s", out)
	}
	for _, c := range []struct{ body, want string }{
		{`{"uuid":"` + ids.NewRandom().String() + `"}`, `the vCon has no attachment with purpose "lawful_basis"`},
		{`{"ciphertext":"AAAA","recipients":[],"unprotected":{"uuid":"` + ids.NewRandom().String() + `"}}`, "the vCon is encrypted and its lawful basis cannot be read"},
	} {
		r := e.Do("POST", "/vcons", k.Token, []byte(c.body), ct...)
		var got lawfulAnswer
		r.JSON(t, &got)
		if r.Status != 422 || !strings.Contains(got.Error, "the tenant's lawful-basis mode is require: "+c.want) {
			t.Errorf("%d %q", r.Status, got.Error)
		}
	}
	if r := e.Do("POST", "/vcons", k.Token, lawfulVcon(ids.NewRandom().String(), goodBasis), ct...); r.Status != 201 {
		t.Errorf("a well-formed basis under require: %d", r.Status)
	}
	// A mode that does not exist.
	if _, errOut, code := e.TryCLI("tenant", "set-lawful-basis", "acme", "strict"); code == 0 || !strings.Contains(errOut, "use off, enforce or require") {
		t.Errorf("%d %s", code, errOut)
	}
	if r := e.Do("PUT", "/admin/tenants/"+tenant+"/lawful-basis", ops.Token, []byte(`{"lawful_basis":"strict"}`), "Content-Type", "application/json"); r.Status != 400 {
		t.Errorf("a bad mode: %d", r.Status)
	}

	// The audit log has the reads of the route and the refusals; the
	// admin log each change of mode.
	audit := e.CLI("audit", "export", "--tenant", "acme")
	for _, want := range []string{`"action":"lawful_basis","target":"` + u + `","status":200`, `"action":"store","target":"` + fresh + `","status":422`} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit log lacks %s", want)
		}
	}
	adminLog := e.CLI("audit", "export", "--admin")
	if n := strings.Count(adminLog, `"action":"tenant_lawful_basis"`); n != 2 {
		t.Errorf("%d tenant_lawful_basis records in the admin log, want 2:\n%s", n, adminLog)
	}
}

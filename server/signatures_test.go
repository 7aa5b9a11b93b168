package server_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/jwstest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// setSignatures sets acme's policy with the PEM anchors given.
func setSignatures(t *testing.T, e *testenv.Env, mode string, anchors ...[]byte) string {
	t.Helper()
	args := []string{"tenant", "set-signatures", "acme", mode}
	for i, a := range anchors {
		f := filepath.Join(t.TempDir(), "ca"+string(rune('0'+i))+".pem")
		if err := os.WriteFile(f, a, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--ca", f)
	}
	return e.CLI(args...)
}

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// TestSignaturesDraftExample: the core draft's signed example verifies
// with its leaf certificate as the tenant's anchor, and its signer is
// kept; anchored higher, at its root, it is refused with the chain's
// reason: the intermediate is an X.509 v1 certificate, which may not sign
// others.
func TestSignaturesDraftExample(t *testing.T) {
	body, err := os.ReadFile(testenv.Shared(t, "vcons/ietf-draft-examples/ab_call_ext_rec_signed.vcon"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Signatures []struct{ Protected string }
	}
	json.Unmarshal(body, &doc)
	hb, _ := base64.RawURLEncoding.DecodeString(doc.Signatures[0].Protected)
	var hdr struct{ X5c []string }
	json.Unmarshal(hb, &hdr)
	chain := make([][]byte, len(hdr.X5c))
	for i, c := range hdr.X5c {
		der, _ := base64.StdEncoding.DecodeString(c)
		chain[i] = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")

	setSignatures(t, e, "verify", chain[2])
	r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon")
	if r.Status != 422 || !strings.Contains(string(r.Body), "signatures[0]: its certificate does not verify to the tenant's trust anchors") ||
		!strings.Contains(string(r.Body), "not authorized to sign other certificates") {
		t.Errorf("anchored at the root, above the v1 intermediate: %d %s", r.Status, r.Body)
	}
	out := setSignatures(t, e, "verify", chain[0])
	if !strings.Contains(out, `"signatures":"verify"`) || !strings.Contains(out, "grp.div.fakevcon.io") {
		t.Errorf("set-signatures printed %s", out)
	}
	if r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon"); r.Status != 201 {
		t.Fatalf("anchored at its leaf: %d %s", r.Status, r.Body)
	}
	var vs struct {
		Versions []struct {
			Signers []struct{ Fingerprint, Subject, Alg string }
		}
	}
	e.Do("GET", "/vcons/0195544a-b9b1-8ee4-b9a2-279e0d16bc46/versions", k.Token, nil).JSON(t, &vs)
	if len(vs.Versions) != 1 || len(vs.Versions[0].Signers) != 1 || vs.Versions[0].Signers[0].Alg != "RS256" ||
		!strings.Contains(vs.Versions[0].Signers[0].Subject, "CN=grp.div.fakevcon.io") {
		t.Fatalf("versions: %+v", vs)
	}
	fp := vs.Versions[0].Signers[0].Fingerprint
	if audit := e.CLI("audit", "export", "--tenant", "acme"); !strings.Contains(audit, `"action":"store signed_by=`+fp+`"`) {
		t.Errorf("no store record naming the signer:\n%s", audit)
	}
}

// TestSignaturesAtTheDoor: over real TLS, under verify, vCons signed
// RS256 (x5c in the unprotected header, as vcon-lib signs), PS256, ES256
// and EdDSA, and one in the flattened form, verify; each way a signature
// fails is a 422 naming it, and nothing is stored; require refuses an
// unsigned vCon, and an encrypted one unless allowed; an unknown
// critical extension is refused under verify, and stored unread under
// off.
func TestSignaturesAtTheDoor(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	ca, other := jwstest.NewCA(t, "Test Root"), jwstest.NewCA(t, "Another Root")
	setSignatures(t, e, "verify", ca.PEM())
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	year := time.Now().AddDate(1, 0, 0)
	use := x509.KeyUsageDigitalSignature
	unsigned := func(u string) string {
		return jwstest.B64([]byte(`{"vcon":"0.4.0","uuid":"` + u + `","parties":[{"tel":"+15555550150"}]}`))
	}
	store := func(body []byte, want int, why string) {
		t.Helper()
		r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon")
		if r.Status != want || !strings.Contains(string(r.Body), why) {
			t.Errorf("store: %d %s, want %d %q", r.Status, r.Body, want, why)
		}
	}
	for alg, key := range map[string]crypto.Signer{"RS256": rsaKey, "PS256": rsaKey, "ES256": ecKey, "EdDSA": edKey} {
		u := ids.NewRandom().String()
		p := unsigned(u)
		sig := jwstest.Sign(t, alg, key, map[string]any{}, p)
		sig.Header, _ = json.Marshal(map[string]any{"x5c": jwstest.X5c(ca.Leaf(t, key, year, use)), "uuid": u})
		store(jwstest.Signed(p, sig), 201, u)
	}
	u := ids.NewRandom().String()
	p := unsigned(u)
	leaf := ca.Leaf(t, ecKey, year, use)
	flat := jwstest.Sign(t, "ES256", ecKey, map[string]any{"x5c": jwstest.X5c(leaf)}, p)
	store([]byte(`{"payload":"`+p+`","protected":"`+flat.Protected+`","header":{"uuid":"`+u+`"},"signature":"`+flat.Signature+`"}`), 201, u)

	objects := e.Count("objects")
	refused := map[string]jwstest.Sig{
		"the signature does not match":            jwstest.Sign(t, "ES256", ecKey, map[string]any{"x5c": jwstest.X5c(leaf)}, unsigned(ids.NewRandom().String())),
		"certificate signed by unknown authority": jwstest.Sign(t, "ES256", ecKey, map[string]any{"x5c": jwstest.X5c(other.Leaf(t, ecKey, year, use))}, p),
		"certificate has expired":                 jwstest.Sign(t, "ES256", ecKey, map[string]any{"x5c": jwstest.X5c(ca.Leaf(t, ecKey, time.Now().Add(-time.Hour), use))}, p),
		`alg \"none\" is no signature`:            jwstest.Sign(t, "none", ecKey, map[string]any{"x5c": jwstest.X5c(leaf)}, p),
		"is not the payload's":                    jwstest.Sign(t, "ES256", ecKey, map[string]any{"x5c": jwstest.X5c(leaf), "uuid": ids.NewRandom().String()}, p),
		"x5u only":                                jwstest.Sign(t, "ES256", ecKey, map[string]any{"x5u": "https://127.0.0.1:1/chain.pem"}, p),
	}
	for why, sig := range refused {
		store(jwstest.Signed(p, sig), 422, "signatures[0]: ")
		store(jwstest.Signed(p, sig), 422, why)
	}
	store(jwstest.Signed(p), 422, "its signatures are empty")
	if r := e.Do("GET", "/vcons/"+u, k.Token, nil); r.Status != 200 {
		t.Errorf("the flattened one: %d", r.Status)
	}
	if n := e.Count("objects"); n != objects {
		t.Errorf("%d objects after the refusals, want %d", n, objects)
	}

	plain := []byte(`{"vcon":"0.4.0","uuid":"` + ids.NewRandom().String() + `"}`)
	store(plain, 201, "")
	setSignatures(t, e, "require")
	store([]byte(`{"vcon":"0.4.0","uuid":"`+ids.NewRandom().String()+`"}`), 422, "the vCon is not signed")
	enc, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(t), "test", "testdata", "vcons", "encrypted.vcon"))
	if err != nil {
		t.Fatal(err)
	}
	store(enc, 422, "--allow-encrypted")
	e.CLI("tenant", "set-signatures", "acme", "require", "--allow-encrypted")
	store(enc, 201, "")

	crit := `{"vcon":"0.4.0","uuid":"%s","critical":["x_redaction"],"parties":[{"tel":"+15555550151"}]}`
	setSignatures(t, e, "verify")
	store([]byte(strings.Replace(crit, "%s", ids.NewRandom().String(), 1)), 422, `critical names the extension \"x_redaction\"`)
	setSignatures(t, e, "off")
	cu := ids.NewRandom().String()
	store([]byte(strings.Replace(crit, "%s", cu, 1)), 201, "")
	var vs struct{ Versions []struct{ Unread string } }
	e.Do("GET", "/vcons/"+cu+"/versions", k.Token, nil).JSON(t, &vs)
	if len(vs.Versions) != 1 || !strings.Contains(vs.Versions[0].Unread, "x_redaction") {
		t.Errorf("the unread one's versions: %+v", vs)
	}
	// Not in the blind index, and counted as such by an erasure.
	e.CLI("tenant", "set-search", tenant, "parties")
	e.Daemon.IndexSearch(t.Context())
	var found struct{ UUIDs []string }
	e.Do("GET", "/vcons?tel=%2B15555550151", k.Token, nil).JSON(t, &found)
	if len(found.UUIDs) != 0 {
		t.Errorf("a search finds the unread vCon: %v", found.UUIDs)
	}
	del := e.NewKey(tenant, "delete")
	r := e.Do("POST", "/erasures", del.Token, []byte(`{"tel":"tel:+15555550151"}`), "Content-Type", "application/json")
	var er struct{ Unsearchable int }
	r.JSON(t, &er)
	if r.Status != 200 || er.Unsearchable != 2 { // the encrypted one and the unread one
		t.Errorf("an erasure by the unread one's party: %d %s, want unsearchable 2", r.Status, r.Body)
	}
}

// TestCheckSignatures: check --signatures --within 90d lists a version
// whose signer's certificate expires in 30 days, not with --within 7d,
// and lists every signed version once the tenant drops their anchor.
func TestCheckSignatures(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write")
	ca := jwstest.NewCA(t, "Test Root")
	setSignatures(t, e, "verify", ca.PEM())
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	stored := map[string]string{}
	for _, days := range []int{30, 365} {
		u := ids.NewRandom().String()
		p := jwstest.B64([]byte(`{"vcon":"0.4.0","uuid":"` + u + `"}`))
		leaf := ca.Leaf(t, key, time.Now().AddDate(0, 0, days), x509.KeyUsageDigitalSignature)
		r := e.Do("POST", "/vcons", k.Token, jwstest.Signed(p, jwstest.Sign(t, "ES256", key, map[string]any{"x5c": jwstest.X5c(leaf)}, p)), "Content-Type", "application/vcon")
		if r.Status != 201 {
			t.Fatalf("store: %d %s", r.Status, r.Body)
		}
		stored[u] = leaf.NotAfter.UTC().Format(time.RFC3339)
	}
	lines := func(within string) []map[string]string {
		var out []map[string]string
		for _, l := range strings.Split(strings.TrimSpace(e.CLI("check", "--signatures", "--within", within)), "\n") {
			if l == "" {
				continue
			}
			var m map[string]string
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			out = append(out, m)
		}
		return out
	}
	got := lines("90d")
	if len(got) != 1 || stored[got[0]["uuid"]] != got[0]["not_after"] || got[0]["why"] != "its certificate expires within 90d" || got[0]["tenant"] != tenant {
		t.Errorf("--within 90d: %v", got)
	}
	if got := lines("7d"); len(got) != 0 {
		t.Errorf("--within 7d: %v", got)
	}
	setSignatures(t, e, "verify", jwstest.NewCA(t, "Another Root").PEM())
	if got := lines("7d"); len(got) != 2 || got[0]["why"] != "its trust anchor is no longer the tenant's" {
		t.Errorf("after the anchor changed: %v", got)
	}
}

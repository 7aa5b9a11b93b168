package server_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

const (
	partyTel = "+15555550177"
	otherTel = "+15555550100"
)

type erasureAnswer struct {
	Erasure string `json:"erasure"`
	State   string `json:"state"`
	Erased  []struct {
		UUID     string `json:"uuid"`
		Versions int    `json:"versions"`
		Whole    bool   `json:"whole"`
	} `json:"erased"`
	Held         []string `json:"held"`
	Unsearchable int      `json:"unsearchable"`
	Receipt      *string  `json:"receipt"`
}

// searchOn turns a tenant's search on and waits until its index is built.
func searchOn(t *testing.T, e *testenv.Env, tenant, token string) {
	t.Helper()
	e.CLI("tenant", "set-search", tenant, "parties")
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r := e.Do("GET", "/vcons?tel="+otherTel, token, nil)
		var got struct{ Complete bool }
		r.JSON(t, &got)
		if got.Complete {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the search index was never built")
}

func storeVcon(t *testing.T, e *testenv.Env, method, path, token string, body []byte, want int) {
	t.Helper()
	if r := e.Do(method, path, token, body, "Content-Type", "application/vcon"); r.Status != want {
		t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Body)
	}
}

// TestErasure: over real TLS, an erasure by tel takes the two vCons whose
// current version names the party whole (one of them with two versions),
// the hidden version of a third whose current version does not, leaves a
// held one and an unrelated one alone, removes the objects before it
// answers, and signs a receipt that openssl verifies with the JWKS.
func TestErasure(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	rw := e.NewKey(tenant, "write", "read")
	del := e.NewKey(tenant, "delete")
	op := e.OperatorKey()
	a, b, c, held, other := ids.NewRandom().String(), ids.NewRandom().String(), ids.NewRandom().String(), ids.NewRandom().String(), ids.NewRandom().String()
	storeVcon(t, e, "POST", "/vcons", rw.Token, apitest.NewVcon(a, "a", partyTel), 201)
	storeVcon(t, e, "POST", "/vcons", rw.Token, apitest.NewVcon(b, "b1", partyTel), 201)
	storeVcon(t, e, "PUT", "/vcons/"+b, rw.Token, apitest.NewVcon(b, "b2", partyTel), 200)
	storeVcon(t, e, "POST", "/vcons", rw.Token, apitest.NewVcon(c, "c1", partyTel), 201)
	cNow := apitest.NewVcon(c, "c2", otherTel)
	storeVcon(t, e, "PUT", "/vcons/"+c, rw.Token, cNow, 200)
	heldBody := apitest.NewVcon(held, "held", partyTel)
	storeVcon(t, e, "POST", "/vcons", rw.Token, heldBody, 201)
	otherBody := apitest.NewVcon(other, "other", otherTel)
	storeVcon(t, e, "POST", "/vcons", rw.Token, otherBody, 201)
	enc, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(t), "test", "testdata", "vcons", "encrypted.vcon"))
	if err != nil {
		t.Fatal(err)
	}
	storeVcon(t, e, "POST", "/vcons", rw.Token, enc, 201)
	if r := e.Do("PUT", "/admin/tenants/"+tenant+"/holds/"+held, op.Token, nil); r.Status != 200 && r.Status != 204 {
		t.Fatalf("hold: %d %s", r.Status, r.Body)
	}
	searchOn(t, e, tenant, rw.Token)
	if n := e.Count("objects"); n != 8 {
		t.Fatalf("%d objects before, want 8", n)
	}

	body := []byte(`{"tel":"tel:` + partyTel + `"}`)
	if r := e.Do("POST", "/erasures", rw.Token, body, "Content-Type", "application/json"); r.Status != 403 {
		t.Fatalf("a write key's erasure: %d %s, want 403", r.Status, r.Body)
	}
	r := e.Do("POST", "/erasures", del.Token, body, "Content-Type", "application/json")
	if r.Status != 200 {
		t.Fatalf("POST /erasures: %d %s", r.Status, r.Body)
	}
	var got erasureAnswer
	r.JSON(t, &got)
	// The objects are gone before the answer: 8 less A's 1, B's 2 and
	// C's first.
	if n := e.Count("objects"); n != 4 {
		t.Errorf("%d objects after the answer, want 4", n)
	}
	want := map[string][2]int{a: {1, 1}, b: {2, 1}, c: {1, 0}}
	if len(got.Erased) != 3 {
		t.Fatalf("erased %+v, want A, B and C", got.Erased)
	}
	for _, it := range got.Erased {
		w, ok := want[it.UUID]
		if !ok || it.Versions != w[0] || it.Whole != (w[1] == 1) {
			t.Errorf("erased %+v, want %v", it, w)
		}
	}
	if !slices.Equal(got.Held, []string{held}) || got.Unsearchable != 1 || got.State != "done" || got.Receipt == nil {
		t.Fatalf("answer %s", r.Body)
	}
	for u, status := range map[string]int{a: 404, b: 404, c: 200, held: 200, other: 200} {
		if r := e.Do("GET", "/vcons/"+u, rw.Token, nil); r.Status != status {
			t.Errorf("GET %s after the erasure: %d, want %d", u, r.Status, status)
		} else if u == c && !bytes.Equal(r.Body, cNow) {
			t.Error("C's current version changed")
		}
	}
	var versions struct{ Versions []json.RawMessage }
	e.Do("GET", "/vcons/"+c+"/versions", rw.Token, nil).JSON(t, &versions)
	if len(versions.Versions) != 1 {
		t.Errorf("C keeps %d versions, want its current one only", len(versions.Versions))
	}
	var found struct{ UUIDs []string }
	e.Do("GET", "/vcons?tel="+partyTel, rw.Token, nil).JSON(t, &found)
	if !slices.Equal(found.UUIDs, []string{held}) {
		t.Errorf("search finds %v after the erasure, want only the held one", found.UUIDs)
	}

	// The receipt, checked by openssl's Ed25519 against the JWKS served.
	jwks := e.Do("GET", "/.well-known/jwks.json", "", nil)
	if jwks.Status != 200 {
		t.Fatalf("GET /.well-known/jwks.json: %d", jwks.Status)
	}
	payload := opensslVerify(t, *got.Receipt, jwks.Body)
	var p map[string]any
	if err := json.Unmarshal(payload, &p); err != nil {
		t.Fatal(err)
	}
	if p["erasure"] != got.Erasure || p["tenant"] != tenant || p["filter"] != "tel" || p["requested_at"] == nil || p["done_at"] == nil {
		t.Errorf("payload %s", payload)
	}
	if strings.Contains(string(payload), "5555550177") || strings.Contains(string(r.Body), "5555550177") {
		t.Error("the receipt or the answer holds the filter's value")
	}

	// The same answer again (with the record's proof once a checkpoint
	// covers it); the CLI verifies it, and refuses it tampered.
	again := e.Do("GET", "/erasures/"+got.Erasure, del.Token, nil)
	if again.Status != 200 || !bytes.Equal(apitest.WithoutProof(t, again.Body), apitest.WithoutProof(t, r.Body)) {
		t.Errorf("GET /erasures/{id}: %d %s, want %s", again.Status, again.Body, r.Body)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "receipt.jws")
	os.WriteFile(file, []byte(*got.Receipt), 0o600)
	if out, errOut, code := e.TryCLI("erasure", "verify", "--receipt", file); code != 0 || !strings.Contains(out, `"valid":true`) {
		t.Errorf("erasure verify: %d %s%s", code, out, errOut)
	}
	parts := strings.Split(*got.Receipt, ".")
	pb, _ := base64.RawURLEncoding.DecodeString(parts[1])
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(bytes.Replace(pb, []byte(`"held":["`), []byte(`"held":[],"x":["`), 1)) + "." + parts[2]
	os.WriteFile(file, []byte(tampered), 0o600)
	if _, errOut, code := e.TryCLI("erasure", "verify", "--receipt", file); code != 1 || !strings.Contains(errOut, "not valid") {
		t.Errorf("a tampered receipt: exit %d %s", code, errOut)
	}

	// A recorder's retry of an erased uuid is refused; a store of C is not.
	if r := e.Do("POST", "/vcons", rw.Token, apitest.NewVcon(a, "a", partyTel), "Content-Type", "application/vcon"); r.Status != 410 {
		t.Errorf("a store of an erased uuid: %d %s, want 410", r.Status, r.Body)
	}
	storeVcon(t, e, "PUT", "/vcons/"+c, rw.Token, apitest.NewVcon(c, "c3", otherTel), 200)

	var audit bytes.Buffer
	audit.WriteString(e.CLI("audit", "export", "--tenant", "acme"))
	if !strings.Contains(audit.String(), `"action":"erase","target":"erasure=`+got.Erasure+` filter=tel vcons=3 versions=4 held=1 not_found=0 unsearchable=1 retention=overridden"`) {
		t.Errorf("no erase record with the counts:\n%s", audit.String())
	}
}

// opensslVerify checks a compact JWS with openssl against the key its kid
// names in jwks, parsing both here, apart from the server's code, and
// returns the payload.
func opensslVerify(t *testing.T, jws string, jwks []byte) []byte {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("openssl is missing")
		}
		t.Skip("NOT RUN: openssl is missing")
	}
	parts := strings.Split(jws, ".")
	if len(parts) != 3 {
		t.Fatalf("not a compact JWS: %q", jws)
	}
	hb, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ Alg, Kid string }
	json.Unmarshal(hb, &h)
	var set struct {
		Keys []struct{ Kty, Crv, X, Kid string }
	}
	json.Unmarshal(jwks, &set)
	var x []byte
	for _, k := range set.Keys {
		if k.Kid == h.Kid && k.Kty == "OKP" && k.Crv == "Ed25519" {
			x, _ = base64.RawURLEncoding.DecodeString(k.X)
		}
	}
	if h.Alg != "EdDSA" || len(x) != 32 {
		t.Fatalf("header %s names no Ed25519 key of %s", hb, jwks)
	}
	dir := t.TempDir()
	spki := append([]byte{0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00}, x...)
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	os.WriteFile(filepath.Join(dir, "pub.der"), spki, 0o600)
	os.WriteFile(filepath.Join(dir, "input"), []byte(parts[0]+"."+parts[1]), 0o600)
	os.WriteFile(filepath.Join(dir, "sig"), sig, 0o600)
	verify := func() error {
		return exec.Command("openssl", "pkeyutl", "-verify", "-pubin", "-keyform", "DER", "-inkey", filepath.Join(dir, "pub.der"),
			"-rawin", "-in", filepath.Join(dir, "input"), "-sigfile", filepath.Join(dir, "sig")).Run()
	}
	if err := verify(); err != nil {
		t.Fatalf("openssl does not verify the receipt: %v", err)
	}
	// And refuses it with one byte of the payload changed.
	in := []byte(parts[0] + "." + parts[1])
	in[len(in)-1] ^= 1
	os.WriteFile(filepath.Join(dir, "input"), in, 0o600)
	if verify() == nil {
		t.Fatal("openssl verifies a changed receipt")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	return payload
}

package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestErasureVerifyAnswer: erasure verify takes the saved JSON answer of
// a real erasure, and refuses it with any of its members edited (naming
// the member), with the last character of its signature changed to one
// that decodes leniently to the same bytes, or against a key set whose
// kid is not its key's thumbprint.
func TestErasureVerifyAnswer(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	rw, del := e.NewKey(tenant, "write"), e.NewKey(tenant, "delete")
	a, b := ids.NewRandom().String(), ids.NewRandom().String()
	for _, u := range []string{a, b} {
		if r := e.Do("POST", "/vcons", rw.Token, apitest.NewVcon(u, "s", "+15555550123"), "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("store: %d %s", r.Status, r.Body)
		}
	}
	r := e.Do("POST", "/erasures", del.Token, []byte(`{"uuids":["`+a+`","`+b+`"]}`), "Content-Type", "application/json")
	if r.Status != 200 {
		t.Fatalf("POST /erasures: %d %s", r.Status, r.Body)
	}
	answer := string(r.Body)
	jwks := e.Do("GET", "/.well-known/jwks.json", "", nil)
	dir := t.TempDir()
	save := func(name, text string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keys := save("jwks.json", string(jwks.Body))
	for _, args := range [][]string{{}, {"--jwks", keys}} {
		out, errOut, code := e.TryCLI(append([]string{"erasure", "verify", "--receipt", save("answer.json", answer)}, args...)...)
		if code != 0 || !strings.Contains(out, `"valid":true`) || !strings.Contains(out, `"vcons":2`) {
			t.Fatalf("erasure verify %v of the answer: %d %s%s", args, code, out, errOut)
		}
	}
	edit := func(from, to string) string {
		t.Helper()
		if !strings.Contains(answer, from) {
			t.Fatalf("no %s in %s", from, answer)
		}
		return strings.Replace(answer, from, to, 1)
	}
	refused := func(name, file, want string, args ...string) {
		t.Helper()
		out, errOut, code := e.TryCLI(append([]string{"erasure", "verify", "--receipt", file}, args...)...)
		if code != 1 || out != "" || !strings.Contains(errOut, want) {
			t.Errorf("%s: exit %d %s%s, want 1 and %q", name, code, out, errOut, want)
		}
	}
	for name, c := range map[string]struct{ answer, want string }{
		"a count":           {edit(`"unsearchable":0`, `"unsearchable":3`), "the answer's unsearchable is 3, the receipt's 0"},
		"another count":     {edit(`"not_found":0`, `"not_found":1`), "the answer's not_found is 1, the receipt's 0"},
		"the next page":     {edit(`"next":null`, `"next":"/erasures/x"`), "the answer's next is neither null nor the path of this erasure's next page"},
		"a count in a list": {edit(`"versions":1`, `"versions":2`), "the answer's erased[0].versions is 2, the receipt's 1"},
		"a flag":            {edit(`"whole":true`, `"whole":false`), "the answer's erased[0].whole is false"},
		"a list":            {edit(`"held":[]`, `"held":["`+a+`"]`), "the answer's held has 1 entry, the receipt's 0"},
		"an id":             {edit(`"erasure":"`, `"erasure":"0`), "the answer's erasure is"},
		"an id in a list":   {strings.Replace(answer, `"uuid":"`+a+`"`, `"uuid":"`+ids.NewRandom().String()+`"`, 1), "the answer's erased"},
		"a time added":      {edit(`"state":"done"`, `"state":"done","done_at":"2026-01-01T00:00:00Z"`), "the answer's done_at is \"2026-01-01T00:00:00Z\""},
		"a member added":    {edit(`"state":"done"`, `"state":"done","kept":[]`), "the answer's kept is not in the receipt"},
		"the state":         {edit(`"state":"done"`, `"state":"pending"`), "the answer's state is not \"done\""},
	} {
		refused(name, save("edited.json", c.answer), "the answer is not valid: "+c.want)
	}
	// The signature's last character, changed so that a lenient decoder
	// reads the same 64 bytes: its 4 low bits are not part of them.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	end := strings.Index(answer, `"receipt":"`) + len(`"receipt":"`)
	end += strings.IndexByte(answer[end:], '"') - 1
	bent := answer[:end] + string(alphabet[strings.IndexByte(alphabet, answer[end])^1]) + answer[end+1:]
	refused("the signature's last character", save("bent.json", bent), "the answer is not valid: the signature is not 64 bytes of base64url")
	// A key set whose kid is not its key's thumbprint.
	set := string(jwks.Body)
	kid := set[strings.Index(set, `"kid":"`)+len(`"kid":"`):]
	kid = kid[:strings.IndexByte(kid, '"')]
	wrong := save("wrong-kid.json", strings.ReplaceAll(set, kid, "made-up"))
	refused("a made-up kid", save("answer.json", answer), `is not a key set of receipts: the kid "made-up" is not the RFC 7638 thumbprint of its key`, "--jwks", wrong)
}

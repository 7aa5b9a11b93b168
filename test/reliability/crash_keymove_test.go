package reliability

import (
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// The catalog of test/testdata/catalog-before-tenant-keys.tgz was made by
// the release before tenant keys (commit 2a28a9b), as an operator's
// server made it: init, tenants acme (search parties+subject, its index
// built) and globex, 1,005 vCons stored in acme and 3 in globex over
// HTTPS, each body fixtureBody(i), then a clean stop. It holds its data
// directory (catalog.db, objects/) and its master.key, laid out as
// testenv's configuration names them.
const (
	fixtureAcme   = 1005
	fixtureGlobex = 500001 // its 3 vCons are fixtureBody(500001...500003)
)

func fixtureBody(i int) []byte {
	return fmt.Appendf(nil, `{"vcon":"0.3.0","uuid":"%s","created_at":"2026-11-30T12:00:00Z","parties":[{"tel":"+1555%07d"}],"subject":"fixture %d"}`, fixtureUUID(i), i, i)
}

func fixtureUUID(i int) string { return fmt.Sprintf("0195a000-0000-7000-8000-%012d", i) }

// oldCatalogEnv is a server's directory holding the fixture's catalog,
// with every vCon it acknowledged in a, by tenant name.
func oldCatalogEnv(t *testing.T) (*testenv.Env, map[string]acked) {
	e := testenv.Prepare(t, testenv.Options{Listen: testenv.FreePort(t)})
	for _, p := range []string{"data", "master.key"} {
		if err := os.RemoveAll(filepath.Join(e.Dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	fixture, err := filepath.Abs("../testdata/catalog-before-tenant-keys.tgz")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tar", "xzf", fixture, "-C", e.Dir).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	a := map[string]acked{"acme": {}, "globex": {}}
	for i := 1; i <= fixtureAcme; i++ {
		a["acme"][fixtureUUID(i)] = fixtureBody(i)
	}
	for i := fixtureGlobex; i < fixtureGlobex+3; i++ {
		a["globex"][fixtureUUID(i)] = fixtureBody(i)
	}
	return e, a
}

// TestOldCatalogMoves: the catalog of the release before tenant keys
// opens, moves its data keys under a key per tenant at the first start,
// reads every vCon back byte for byte, builds its search index again
// under the tenant's key, and checks clean.
func TestOldCatalogMoves(t *testing.T) {
	e, a := oldCatalogEnv(t)
	finishMove(t, e, a)
}

// crashKeyMove cuts the move of the fixture's catalog at point; the next
// start finishes it.
func crashKeyMove(t *testing.T, _ *crashEnv, point string) {
	e, a := oldCatalogEnv(t)
	runKilled(t, e, point, "serve")
	finishMove(t, e, a)
}

// finishMove starts the server on a catalog whose move may be unfinished
// and checks what the move must leave.
func finishMove(t *testing.T, e *testenv.Env, a map[string]acked) {
	t.Helper()
	tokens := map[string]string{}
	for name := range a {
		tokens[name] = e.NewKey(name, "read", "write").Token
	}
	p := e.StartBinary()
	for name, acks := range a {
		verifyAcked(t, e, tokens[name], acks)
	}
	// The index made under the master key is built again under acme's.
	q := "/vcons?tel=" + url.QueryEscape("+15550000007")
	deadline := time.Now().Add(time.Minute)
	for {
		r := e.Do("GET", q, tokens["acme"], nil)
		if r.Status == 200 && strings.Contains(string(r.Body), fixtureUUID(7)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a search after the move answers %d %s", r.Status, r.Body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	p.Stop()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(e.Dir, "data", "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var unmoved, keys int
	var moved string
	db.QueryRow(`SELECT count(*) FROM versions WHERE substr(wrapped_key, 1, 1) <> x'02'`).Scan(&unmoved)
	db.QueryRow(`SELECT count(*) FROM tenant_keys`).Scan(&keys)
	db.QueryRow(`SELECT value FROM meta WHERE key = 'key_move'`).Scan(&moved)
	if unmoved != 0 || keys != 2 || moved != "done" {
		t.Fatalf("after the move: %d data keys not under a tenant key, %d tenant keys, key_move %q", unmoved, keys, moved)
	}
	if out, errOut, code := e.TryCLI("check", "--deep"); code != 0 || strings.Contains(out, `"damaged":["`) || strings.Contains(out, `"problems":["`) {
		t.Fatalf("check --deep after the move: exit %d\n%s%s", code, out, errOut)
	}
}

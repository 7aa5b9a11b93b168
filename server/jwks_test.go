package server_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/test/kit/testenv"
	_ "modernc.org/sqlite"
)

// TestJWKSKidIsThumbprint: a receipt signing key whose kid in the catalog
// is not its key's RFC 7638 thumbprint is not served, and erasure verify
// refuses the catalog's keys, naming the kid.
func TestJWKSKidIsThumbprint(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	if r := e.Do("GET", "/.well-known/jwks.json", "", nil); r.Status != 200 {
		t.Fatalf("GET /.well-known/jwks.json: %d %s", r.Status, r.Body)
	}
	e.Stop()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(e.Config.DataDir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`UPDATE signing_keys SET kid = 'made-up' WHERE purpose = 'receipt'`)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	if r := e.Do("GET", "/.well-known/jwks.json", "", nil); r.Status != 500 || !strings.Contains(e.Log.String(), `the kid \"made-up\" is not the RFC 7638 thumbprint of its key`) {
		t.Errorf("GET /.well-known/jwks.json with a made-up kid: %d %s, want 500 and the kid in the log:\n%s", r.Status, r.Body, e.Log.String())
	}
	file := filepath.Join(t.TempDir(), "receipt.jws")
	os.WriteFile(file, []byte("a.b.c"), 0o600)
	if _, errOut, code := e.TryCLI("erasure", "verify", "--receipt", file); code != 1 || !strings.Contains(errOut, `the kid "made-up" is not the RFC 7638 thumbprint`) {
		t.Errorf("erasure verify against a made-up kid: exit %d %s", code, errOut)
	}
}

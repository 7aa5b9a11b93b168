package cli_test

import (
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
	_ "modernc.org/sqlite"
)

// TestOpsHelp: the commands are listed, and each --help names its flag.
func TestOpsHelp(t *testing.T) {
	e := testenv.Prepare(t, testenv.Options{})
	out := e.CLI("--help")
	for _, want := range []string{"backup", "master-key rotate", "version"} {
		if !strings.Contains(out, "  "+want+" ") {
			t.Errorf("--help does not list %q:\n%s", want, out)
		}
	}
	for cmd, flag := range map[string]string{"backup": "-to", "master-key rotate": "-new"} {
		out := e.CLI(append(strings.Fields(cmd), "--help")...)
		if !strings.Contains(out, "usage: vcon-server "+cmd) || !strings.Contains(out, flag) {
			t.Errorf("%s --help:\n%s", cmd, out)
		}
	}
}

// TestVersion prints exactly {version, go, os, arch}.
func TestVersion(t *testing.T) {
	e := testenv.Prepare(t, testenv.Options{})
	var v map[string]string
	if err := json.Unmarshal([]byte(e.CLI("version")), &v); err != nil {
		t.Fatal(err)
	}
	if len(v) != 4 || v["version"] == "" || !strings.HasPrefix(v["go"], "go") || v["os"] == "" || v["arch"] == "" {
		t.Fatalf("version printed %v", v)
	}
}

// TestRotateEmpty rotates a catalog that holds no version yet.
func TestRotateEmpty(t *testing.T) {
	e := testenv.Prepare(t, testenv.Options{})
	newKey := filepath.Join(e.Dir, "new.key")
	// A base64 key file with a newline, as an editor leaves it.
	text := base64.StdEncoding.EncodeToString([]byte("thirty-two bytes of a master key")) + "\n"
	if err := os.WriteFile(newKey, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := e.CLI("master-key", "rotate", "--new", newKey); out != `{"new_key":"`+newKey+`","rotated":0}`+"\n" {
		t.Fatalf("rotate printed %q", out)
	}
}

// TestRotateRefusesDamagedKey: a tenant key the current master key does
// not open stops the rotation, which names the tenant and changes
// nothing: the old key still opens every other tenant.
func TestRotateRefusesDamagedKey(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	acme, globex := e.Tenant("acme"), e.Tenant("globex")
	store := func(tenant string) (string, string) {
		k := e.NewKey(tenant, "write", "read")
		u := ids.NewRandom().String()
		if r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(u, "x", "+15555550100"), "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("POST: %d", r.Status)
		}
		return k.Token, u
	}
	good, goodUUID := store(acme)
	bad, badUUID := store(globex)
	e.Stop()
	catPath := filepath.Join(e.Config.DataDir, "catalog.db")
	db, err := sql.Open("sqlite", "file:"+catPath)
	if err != nil {
		t.Fatal(err)
	}
	// Flip one byte of the tag: globex's key no longer verifies.
	g := ids.MustParse(globex)
	if _, err := db.Exec(`UPDATE tenant_keys SET wrapped = substr(wrapped, 1, 60) || x'00' WHERE tenant = ?`, g[:]); err != nil {
		t.Fatal(err)
	}
	var before []byte
	db.QueryRow(`SELECT value FROM meta WHERE key = 'key_check'`).Scan(&before)
	db.Close()

	newKey := filepath.Join(e.Dir, "new.key")
	if err := os.WriteFile(newKey, make([]byte, 32), 0o400); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := e.TryCLI("master-key", "rotate", "--new", newKey)
	if code != 1 || out != "" || !strings.Contains(errOut, "the key of tenant "+globex) || !strings.Contains(errOut, "nothing was rotated") {
		t.Fatalf("rotate over a damaged key: %d %q %q", code, out, errOut)
	}
	db, _ = sql.Open("sqlite", "file:"+catPath)
	var after []byte
	var rotated int
	db.QueryRow(`SELECT value FROM meta WHERE key = 'key_check'`).Scan(&after)
	db.QueryRow(`SELECT count(*) FROM meta WHERE key = 'rotated_at'`).Scan(&rotated)
	db.Close()
	if string(after) != string(before) || rotated != 0 {
		t.Fatal("a refused rotation changed the key check")
	}
	e.Start()
	if r := e.Do("GET", "/vcons/"+goodUUID, good, nil); r.Status != 200 {
		t.Errorf("another tenant's vCon reads %d after the refused rotation, want 200", r.Status)
	}
	if r := e.Do("GET", "/vcons/"+badUUID, bad, nil); r.Status != 500 {
		t.Errorf("the vCon of the tenant whose key is damaged reads %d, want 500", r.Status)
	}
}

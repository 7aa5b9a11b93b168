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

// TestRotateRefusesDamagedKey: a wrapped key the current master key does
// not open stops the rotation, which names the version and changes
// nothing: the old key still opens everything else.
func TestRotateRefusesDamagedKey(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	k := e.NewKey(e.Tenant("acme"), "write", "read")
	var versions []string
	var uuids []string
	for i := 0; i < 3; i++ {
		u := ids.NewRandom().String()
		r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(u, "x", "+15555550100"), "Content-Type", "application/vcon")
		if r.Status != 201 {
			t.Fatalf("POST: %d", r.Status)
		}
		var got struct{ Version string }
		r.JSON(t, &got)
		versions = append(versions, got.Version)
		uuids = append(uuids, u)
	}
	e.Stop()
	catPath := filepath.Join(e.Config.DataDir, "catalog.db")
	db, err := sql.Open("sqlite", "file:"+catPath)
	if err != nil {
		t.Fatal(err)
	}
	bad := ids.MustParse(versions[1])
	// Flip one byte of the tag: the key no longer verifies.
	if _, err := db.Exec(`UPDATE versions SET wrapped_key = substr(wrapped_key, 1, 60) || x'00' WHERE id = ?`, bad[:]); err != nil {
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
	if code != 1 || out != "" || !strings.Contains(errOut, "the data key of version "+versions[1]) || !strings.Contains(errOut, "nothing was rotated") {
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
	for i, u := range uuids {
		want := 200
		if i == 1 {
			want = 500 // its wrapped key is damaged
		}
		if r := e.Do("GET", "/vcons/"+u, k.Token, nil); r.Status != want {
			t.Errorf("%s reads %d after the refused rotation, want %d", u, r.Status, want)
		}
	}
}

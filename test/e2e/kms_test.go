package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/kms"
	"github.com/vcon-server/vcon-server/internal/masterkey"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/kmstest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestKMSMasterKey: under [kms], init writes only the wrapped master key,
// the server opens with it, and the raw key's bytes are in no file of the
// host; master-key rotate makes the new key wrapped too.
func TestKMSMasterKey(t *testing.T) {
	a := kmstest.StartLocalKMS(t)
	e := testenv.Prepare(t, testenv.Options{Storage: a.TOML()})
	keyFile := filepath.Join(e.Dir, "master.key")
	raw := unwrapFile(t, a, keyFile)
	e.Start()
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	uuid := ids.NewRandom().String()
	body := apitest.NewVcon(uuid, "wrapped", "+15555550100")
	if r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon"); r.Status != 201 {
		t.Fatalf("store: %d %s", r.Status, r.Body)
	}
	e.Stop()
	noRawKey(t, e.Dir, raw)

	newKey := filepath.Join(e.Dir, "master-2.key")
	if _, errOut, code := e.TryCLI("master-key", "rotate", "--new", newKey); code != 0 {
		t.Fatalf("rotate under [kms]: %d %s", code, errOut)
	}
	setMasterKey(t, e, newKey)
	e.Start()
	if r := e.Do("GET", "/vcons/"+uuid, k.Token, nil); r.Status != 200 || !bytes.Equal(r.Body, body) {
		t.Fatalf("read after rotate: %d", r.Status)
	}
	e.Stop()
	noRawKey(t, e.Dir, unwrapFile(t, a, newKey))
}

// TestStolenDisk is the stolen-disk drill: the data directory and the
// configuration copied elsewhere open nothing without the KMS, and serve
// and check say why: the credentials missing, the key disabled, the KMS
// out of reach. With the KMS, the copy opens.
func TestStolenDisk(t *testing.T) {
	a := kmstest.StartLocalKMS(t)
	e := testenv.Prepare(t, testenv.Options{Storage: a.TOML()})
	e.Start()
	k := e.NewKey(e.Tenant("acme"), "write", "read")
	if r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(ids.NewRandom().String(), "stolen", "+15555550100"), "Content-Type", "application/vcon"); r.Status != 201 {
		t.Fatalf("store: %d %s", r.Status, r.Body)
	}
	e.Stop()

	thief := copyHost(t, e)
	refused := func(why string, want ...string) {
		t.Helper()
		_, errOut, code := thief.TryCLI("check")
		err := thief.TryStart()
		if code == 0 || err == nil {
			t.Fatalf("%s: check exit %d, serve %v: the copy opened", why, code, err)
		}
		for _, msg := range []string{errOut, err.Error()} {
			for _, w := range want {
				if !strings.Contains(msg, w) {
					t.Errorf("%s: %q does not say %q", why, msg, w)
				}
			}
		}
		t.Logf("%s: %s", why, strings.TrimSpace(errOut))
	}

	// The secret access key stayed with the host's credentials store.
	secret, err := os.ReadFile(a.SecretFile)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(a.SecretFile)
	refused("no credentials", "secret_access_key_file", a.SecretFile)
	if err := os.WriteFile(a.SecretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}

	a.Disable(t, a.KeyID)
	refused("key disabled", "awskms key", "decrypt", "does not open")
	a.Enable(t, a.KeyID)

	a.Stop(t)
	refused("KMS out of reach", "awskms key", "does not open")
}

// copyHost copies a stopped server's folder (configuration, master key
// file, data directory) to another place, as a stolen disk would.
func copyHost(t *testing.T, e *testenv.Env) *testenv.Env {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-a", e.Dir+"/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	c := *e
	c.Dir, c.ConfigPath = dir, filepath.Join(dir, "vcon-server.toml")
	return &c
}

// unwrapFile asks the KMS for the raw key a wrapped key file holds.
func unwrapFile(t *testing.T, a *kmstest.AWS, path string) []byte {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(text), "vcon-server wrapped master key v1\n") {
		t.Fatalf("%s is not a wrapped key:\n%s", path, text)
	}
	w, err := kms.New(a.Config(""))
	if err != nil {
		t.Fatal(err)
	}
	var catalog ids.ID
	var ct []byte
	for _, line := range strings.Split(string(text), "\n") {
		if v, ok := strings.CutPrefix(line, "catalog: "); ok {
			catalog = ids.MustParse(v)
		}
		if v, ok := strings.CutPrefix(line, "ciphertext: "); ok {
			if ct, err = base64.StdEncoding.DecodeString(v); err != nil {
				t.Fatal(err)
			}
		}
	}
	raw, err := w.Unwrap(context.Background(), ct, masterkey.Context(catalog))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// noRawKey fails when any file under dir holds the raw key, raw or in
// base64.
func noRawKey(t *testing.T, dir string, raw []byte) {
	t.Helper()
	forms := [][]byte{raw, []byte(base64.StdEncoding.EncodeToString(raw)), []byte(base64.RawURLEncoding.EncodeToString(raw))}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range forms {
			if bytes.Contains(data, f) {
				t.Errorf("%s holds the raw master key", p)
			}
		}
		return nil
	})
}

// TestMasterKeyWrap: a raw key under [kms] is refused with the command
// that moves it; master-key wrap moves it, also when an earlier run was
// cut after any of its steps, and a wrapped key without [kms] is refused.
func TestMasterKeyWrap(t *testing.T) {
	a := kmstest.StartLocalKMS(t)
	e := testenv.Prepare(t, testenv.Options{})
	e.Start()
	k := e.NewKey(e.Tenant("acme"), "write", "read")
	uuid := ids.NewRandom().String()
	body := apitest.NewVcon(uuid, "moved", "+15555550100")
	if r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon"); r.Status != 201 {
		t.Fatalf("store: %d %s", r.Status, r.Body)
	}
	e.Stop()
	keyFile := filepath.Join(e.Dir, "master.key")
	before, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}

	e.WriteConfig(a.TOML())
	if _, errOut, code := e.TryCLI("check"); code == 0 || !strings.Contains(errOut, "holds a raw key, and the configuration has a [kms] table: run vcon-server master-key wrap") {
		t.Fatalf("a raw key under [kms]: exit %d %s", code, errOut)
	}
	// A run cut after it wrote the wrapped form and kept the raw key, but
	// before the rename: master.key is still the raw key.
	if err := os.WriteFile(keyFile+".wrapped", []byte("half"), 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(keyFile, keyFile+".raw"); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := e.TryCLI("master-key", "wrap")
	if code != 0 || !strings.Contains(errOut, "shred -u "+keyFile+".raw") || !strings.Contains(out, `"raw_copy"`) {
		t.Fatalf("wrap: exit %d\n%s\n%s", code, out, errOut)
	}
	if kept, err := os.ReadFile(keyFile + ".raw"); err != nil || !bytes.Equal(kept, before) {
		t.Fatalf("the raw key was not kept for the operator: %v", err)
	}
	if _, err := os.Stat(keyFile + ".wrapped"); !os.IsNotExist(err) {
		t.Errorf("master.key.wrapped left behind: %v", err)
	}
	if raw := unwrapFile(t, a, keyFile); !bytes.Equal(raw, before) {
		t.Fatal("the wrapped key is not the raw key it replaced")
	}
	if _, errOut, code := e.TryCLI("master-key", "wrap"); code == 0 || !strings.Contains(errOut, "is wrapped already") {
		t.Errorf("wrap again: exit %d %s", code, errOut)
	}
	os.Remove(keyFile + ".raw")
	e.Start()
	if r := e.Do("GET", "/vcons/"+uuid, k.Token, nil); r.Status != 200 || !bytes.Equal(r.Body, body) {
		t.Fatalf("read with the wrapped key: %d", r.Status)
	}
	e.Stop()
	noRawKey(t, e.Dir, before)

	e.WriteConfig("")
	if _, errOut, code := e.TryCLI("check"); code == 0 || !strings.Contains(errOut, "holds a key wrapped by a KMS, and the configuration has no [kms] table") {
		t.Fatalf("a wrapped key without [kms]: exit %d %s", code, errOut)
	}
}

// TestVaultMasterKey: the master key wrapped by a Vault transit key; a
// token that may no longer decrypt stops every start with Vault's refusal,
// and once it may again the archive opens as before.
func TestVaultMasterKey(t *testing.T) {
	v := kmstest.StartVault(t)
	e := testenv.Prepare(t, testenv.Options{Storage: fmt.Sprintf(`
[kms]
provider = "vault"

[kms.vault]
address = %q
key = %q
token_file = %q
ca_file = %q
`, v.Address, v.Key, v.TokenFile, v.CAFile)})
	e.Start()
	k := e.NewKey(e.Tenant("acme"), "write", "read")
	uuid := ids.NewRandom().String()
	body := apitest.NewVcon(uuid, "vault", "+15555550100")
	if r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon"); r.Status != 201 {
		t.Fatalf("store: %d %s", r.Status, r.Body)
	}
	e.Stop()
	text, err := os.ReadFile(filepath.Join(e.Dir, "master.key"))
	if err != nil || !strings.Contains(string(text), "\nciphertext: ") || !strings.Contains(string(text), `kms: vault transit key "vcon-server"`) {
		t.Fatalf("master.key is not wrapped by Vault: %v\n%s", err, text)
	}

	v.DenyDecrypt(t)
	err = e.TryStart()
	if err == nil || !strings.Contains(err.Error(), "does not open") || !strings.Contains(err.Error(), "403") {
		t.Fatalf("a start with a token that may not decrypt: %v", err)
	}
	t.Logf("refused: %v", err)
	v.AllowAll(t)
	e.Start()
	if r := e.Do("GET", "/vcons/"+uuid, k.Token, nil); r.Status != 200 || !bytes.Equal(r.Body, body) {
		t.Fatalf("read once the token may decrypt again: %d", r.Status)
	}
}

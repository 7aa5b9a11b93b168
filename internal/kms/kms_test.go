package kms_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/config"
	"github.com/vcon-server/vcon-server/internal/kms"
)

// String names the provider and the key, and where it lives; New makes
// no call, so an address nobody serves is fine here.
func TestString(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	os.WriteFile(token, []byte(testToken+"\n"), 0o400)
	for _, c := range []struct {
		cfg  *config.KMS
		want string
	}{
		{&config.KMS{Provider: "vault", Vault: &config.Vault{Address: "https://vault.example.com:8200", Mount: "transit", Key: "vcon-server", TokenFile: token}},
			`vault transit key "vcon-server" at https://vault.example.com:8200`},
		{&config.KMS{Provider: "vault", Vault: &config.Vault{Address: "https://vault.example.com:8200", Mount: "team/transit", Key: "k", TokenFile: token}},
			`vault transit key "k" at https://vault.example.com:8200 (mount "team/transit")`},
		{&config.KMS{Provider: "awskms", AWSKMS: &config.AWSKMS{Region: "eu-west-1", KeyID: "alias/vcon", AccessKeyID: "AKIA", SecretAccessKeyFile: token}},
			`awskms key "alias/vcon" in eu-west-1`},
		{&config.KMS{Provider: "command", Command: &config.Command{Wrap: []string{"/bin/true", "--key", "k"}, Unwrap: []string{"/bin/false"}}},
			`command /bin/true (unwrap /bin/false)`},
	} {
		w := newWrapper(t, c.cfg)
		if w.String() != c.want {
			t.Errorf("String() = %s, want %s", w, c.want)
		}
		if strings.Contains(w.String(), testToken) {
			t.Errorf("String() names the token: %s", w)
		}
	}
}

// A token file that others may read, an empty one, one that is missing:
// each refused by New with the path and what to do, never the token.
func TestTokenFileRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := func(path string) *config.KMS {
		return &config.KMS{Provider: "vault", Vault: &config.Vault{Address: "https://vault.example.com:8200", Mount: "transit", Key: "k", TokenFile: path}}
	}
	for name, c := range map[string]struct {
		body []byte
		mode os.FileMode
		want string
	}{
		"readable":   {[]byte(testToken), 0o644, "is readable by group or others (mode 0644); run: chmod 0600"},
		"writable":   {[]byte(testToken), 0o620, "is writable or executable by group or others (mode 0620)"},
		"empty":      {[]byte("\n"), 0o600, "is empty"},
		"two tokens": {[]byte(testToken + " " + testToken), 0o600, "must hold one line without spaces"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		os.WriteFile(path, c.body, 0o600)
		os.Chmod(path, c.mode)
		_, err := kms.New(cfg(path))
		text := wantKind(t, err, "read token_file", nil)
		if !strings.Contains(text, path+" "+c.want) {
			t.Errorf("%s: %s: want %q", name, text, c.want)
		}
		noSecret(t, text, []byte(testToken))
	}
	_, err := kms.New(cfg(filepath.Join(dir, "missing")))
	if text := wantKind(t, err, "read token_file", nil); !strings.Contains(text, "missing cannot be read: no such file or directory") {
		t.Errorf("%s: want the missing file named", text)
	}
	if _, err := kms.New(nil); err == nil {
		t.Error("New(nil): no error")
	}
}

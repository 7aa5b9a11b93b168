package kmstest_test

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/config"
	"github.com/vcon-server/vcon-server/test/kit/kmstest"
)

// local-kms starts behind the TLS proxy with a key made, takes the key
// calls the revocation tests make, and its files are as a configuration
// needs them: the secret in a 0600 file, the CA beside it, and TOML
// reads back as Config.
func TestStartLocalKMS(t *testing.T) {
	a := kmstest.StartLocalKMS(t)
	if !strings.HasPrefix(a.Endpoint, "https://127.0.0.1:") || !strings.HasPrefix(a.Upstream, "http://127.0.0.1:") || a.KeyID == "" {
		t.Fatalf("endpoint %s, upstream %s, key %q", a.Endpoint, a.Upstream, a.KeyID)
	}
	if fi, err := os.Stat(a.SecretFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file: %v %v", fi, err)
	}
	if _, err := os.Stat(a.CAFile); err != nil {
		t.Fatal(err)
	}
	k := a.CreateKey(t)
	if k == a.KeyID {
		t.Fatalf("CreateKey gave the first key's id again")
	}
	a.Disable(t, k)
	a.Enable(t, k)
	a.ScheduleDeletion(t, k)
	a.CancelDeletion(t, k)
	c, err := config.Parse([]byte(a.TOML()), "/etc/vcon-server/config.toml")
	if err != nil || !reflect.DeepEqual(c.KMS, a.Config("")) {
		t.Errorf("TOML read back: %+v, %v; want Config's %+v", c.KMS.AWSKMS, err, a.Config("").AWSKMS)
	}
}

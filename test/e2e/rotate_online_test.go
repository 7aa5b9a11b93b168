package e2e

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/test/kit/kmstest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestRotateWhileServing: master-key rotate beside a running server. The
// server takes the new key within a second, without a restart: every
// version reads back, stores go on, and a tenant made afterwards has its
// key under the new master key. Started again, the server refuses the old key file and opens with the
// new one.
func TestRotateWhileServing(t *testing.T) {
	t.Run("file", func(t *testing.T) { rotateWhileServing(t, "", true) })
	// Under [kms], rotate makes the new key wrapped by the service, and the
	// server unwraps it there.
	t.Run("kms", func(t *testing.T) { rotateWhileServing(t, kmstest.StartLocalKMS(t).TOML(), false) })
}

func rotateWhileServing(t *testing.T, storage string, makeFile bool) {
	e := testenv.New(t, testenv.Options{Storage: storage})
	k := e.NewKey(e.Tenant("acme"), "write", "read")
	bodies := storeMany(t, e, k.Token, 5)

	newKey := filepath.Join(e.Dir, "master-2.key")
	if makeFile {
		newKeyFile(t, newKey, 0o400)
	}
	out, errOut, code := e.TryCLI("master-key", "rotate", "--new", newKey)
	if code != 0 || !strings.Contains(out, `"rotated":1`) || !strings.Contains(errOut, "the running server takes the new key within a second") {
		t.Fatalf("rotate beside a running server: %d %s %s", code, out, errOut)
	}
	e.WaitLog(0, "the master key was rotated: serving with the new key")
	readsBack(t, e, k.Token, bodies)
	bodies = mergeBodies(bodies, storeMany(t, e, k.Token, 2))

	ops := e.OperatorKey()
	r := e.Do("POST", "/admin/tenants", ops.Token, []byte(`{"name":"globex"}`), "Content-Type", "application/json")
	if r.Status != 201 {
		t.Fatalf("a tenant made after the rotation: %d %s", r.Status, r.Body)
	}
	k2 := e.NewKey("globex", "write", "read")
	after := storeMany(t, e, k2.Token, 2)
	e.Stop()

	if err := e.TryStart(); err == nil || !strings.Contains(err.Error(), "a master-key rotation replaced it") {
		t.Fatalf("a start with the old key file after the rotation: %v", err)
	}
	setMasterKey(t, e, newKey)
	e.Start()
	readsBack(t, e, k.Token, bodies)
	readsBack(t, e, k2.Token, after)
	e.Stop()
	if out, errOut, code := e.TryCLI("check", "--deep"); code != 0 || !bytes.Contains([]byte(out), []byte(`"damaged":[]`)) {
		t.Fatalf("check --deep after the rotation: %d %s %s", code, out, errOut)
	}
}

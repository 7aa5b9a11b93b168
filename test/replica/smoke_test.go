package replica

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

func TestSmokeDirReplica(t *testing.T) {
	target := t.TempDir()
	e := testenv.New(t, testenv.Options{Storage: "[replica]\nto = \"" + target + "\"\nmax_lag = 0\n"})
	k := e.NewKey(e.Tenant("acme"), "write", "read", "delete")
	bodies := map[string][]byte{}
	for range 20 {
		u := ids.NewRandom().String()
		body := apitest.NewVcon(u, "hello", "+15555550100")
		if r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("POST: %d %s", r.Status, r.Body)
		}
		bodies[u] = body
	}
	e.Stop()
	for _, f := range []string{"catalog.db", "catalog.db-wal", "catalog.db-shm"} {
		os.Remove(filepath.Join(e.Config.DataDir, f))
	}
	t.Log(e.CLI("restore"))
	e.Start()
	for u, body := range bodies {
		r := e.Do("GET", "/vcons/"+u, k.Token, nil)
		if r.Status != 200 || !bytes.Equal(r.Body, body) {
			t.Fatalf("GET %s after restore: %d", u, r.Status)
		}
	}
	e.Stop()
	out, errOut, code := e.TryCLI("check")
	if code != 0 {
		t.Fatalf("check: %d %s\n%s", code, errOut, out)
	}
}

// TestCLIChangesAreReplicated: a command that changes the catalog returns
// once its change is in the replica, with the server running or stopped.
func TestCLIChangesAreReplicated(t *testing.T) {
	target := t.TempDir()
	e := testenv.New(t, testenv.Options{Storage: "[replica]\nto = \"" + target + "\"\n"})
	e.Tenant("running")
	e.Stop()
	e.Tenant("stopped")
	for _, f := range []string{"catalog.db", "catalog.db-wal", "catalog.db-shm"} {
		os.Remove(filepath.Join(e.Config.DataDir, f))
	}
	e.CLI("restore")
	out := e.CLI("tenant", "list")
	for _, name := range []string{"running", "stopped"} {
		if !bytes.Contains([]byte(out), []byte(`"name":"`+name+`"`)) {
			t.Errorf("tenant %s is not in the restored catalog:\n%s", name, out)
		}
	}
}

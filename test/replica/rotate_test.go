package replica

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestRotateWhileServingReplica: a rotation beside the running server.
// Once the server takes the new key, its replica writes a whole
// generation under it, so that a restore with the new key alone (the old
// key file gone) gives back every vCon, those stored before the rotation
// and after it.
func TestRotateWhileServingReplica(t *testing.T) {
	target := t.TempDir()
	e := testenv.New(t, testenv.Options{Storage: "[replica]\nto = \"" + target + "\"\nmax_lag = 0\n"})
	k := e.NewKey(e.Tenant("acme"), "write", "read")
	bodies := map[string][]byte{}
	store := func(n int, what string) {
		for i := range n {
			u := ids.NewRandom().String()
			body := apitest.NewVcon(u, fmt.Sprintf("%s %d", what, i), "+15555550100")
			if r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon"); r.Status != 201 {
				t.Fatalf("POST: %d %s", r.Status, r.Body)
			}
			bodies[u] = body
		}
	}
	store(10, "before")
	newKey := filepath.Join(e.Dir, "master-2.key")
	if err := os.WriteFile(newKey, bytes.Repeat([]byte{9}, 32), 0o400); err != nil {
		t.Fatal(err)
	}
	e.CLI("master-key", "rotate", "--new", newKey)
	e.WaitLog(0, "serving with the new key")
	store(5, "after")
	e.Stop()

	for _, f := range []string{"catalog.db", "catalog.db-wal", "catalog.db-shm"} {
		os.Remove(filepath.Join(e.Config.DataDir, f))
	}
	os.Remove(e.Config.MasterKey)
	text, err := os.ReadFile(e.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	text = bytes.Replace(text, []byte(`master_key = "master.key"`), []byte(`master_key = "master-2.key"`), 1)
	if err := os.WriteFile(e.ConfigPath, text, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Log(e.CLI("restore"))
	e.Start()
	for u, body := range bodies {
		if r := e.Do("GET", "/vcons/"+u, k.Token, nil); r.Status != 200 || !bytes.Equal(r.Body, body) {
			t.Errorf("GET %s after the restore: %d", u, r.Status)
		}
	}
}

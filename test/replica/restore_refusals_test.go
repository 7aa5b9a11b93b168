package replica

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/seal"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestRestoreRefusals: restore writes a catalog only from a replica it can
// open whole with the configured master key. With another key, or from an
// empty target, it refuses, says why, and leaves no catalog behind (a
// later restore with the right key then works); over an existing catalog
// it refuses, naming the file.
func TestRestoreRefusals(t *testing.T) {
	target := t.TempDir()
	e := testenv.Prepare(t, testenv.Options{})
	e.WriteConfig(replicaTOML(target, 0))
	e.Start()
	token := e.NewKey(e.Tenant("acme"), "write", "read").Token
	u := ids.NewRandom().String()
	body := apitest.NewVcon(u, "restored", "+15555550100")
	if r := e.Do("POST", "/vcons", token, body, "Content-Type", "application/vcon"); r.Status != 201 {
		t.Fatalf("POST: %d %s", r.Status, r.Body)
	}
	e.Stop()
	catalogFile := filepath.Join(e.Config.DataDir, "catalog.db")

	_, errOut, code := e.TryCLI("restore")
	t.Logf("over a catalog: %s", strings.TrimSpace(errOut))
	if code == 0 || !strings.Contains(errOut, catalogFile) {
		t.Errorf("restore over a catalog: exit %d, want a refusal naming %s: %s", code, catalogFile, errOut)
	}
	wipeCatalog(t, e) // the objects are in the data directory

	// Another master key: the one configured is swapped for a new one.
	right := e.Config.MasterKey
	saved := filepath.Join(t.TempDir(), "right.key")
	if err := os.Rename(right, saved); err != nil {
		t.Fatal(err)
	}
	if err := seal.CreateMasterKeyFile(right); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = e.TryCLI("restore")
	t.Logf("with another key: %s", strings.TrimSpace(errOut))
	if code == 0 || !strings.Contains(errOut, "master key") {
		t.Errorf("restore with another master key: exit %d, want a refusal naming the master key: %s", code, errOut)
	}
	if _, err := os.Stat(catalogFile); !os.IsNotExist(err) {
		t.Errorf("a refused restore left %s: %v", catalogFile, err)
	}
	if err := os.Remove(right); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(saved, right); err != nil {
		t.Fatal(err)
	}

	// An empty target: nothing to restore from.
	e.WriteConfig(replicaTOML(t.TempDir(), 0))
	_, errOut, code = e.TryCLI("restore")
	t.Logf("from an empty target: %s", strings.TrimSpace(errOut))
	if code == 0 || !strings.Contains(errOut, "no generation") {
		t.Errorf("restore from an empty target: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(catalogFile); !os.IsNotExist(err) {
		t.Errorf("a refused restore left %s: %v", catalogFile, err)
	}

	e.WriteConfig(replicaTOML(target, 0))
	e.CLI("restore")
	e.Start()
	if r := e.Do("GET", "/vcons/"+u, token, nil); r.Status != 200 || !bytes.Equal(r.Body, body) {
		t.Errorf("GET after the restore: %d %s", r.Status, r.Body)
	}
}

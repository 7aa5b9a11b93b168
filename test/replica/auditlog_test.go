package replica

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestRestoreKeepsTheAuditLog: the replica carries the logs' trees and
// checkpoints (every table is replicated), so a catalog restored from it
// verifies against a checkpoint saved before the host was lost, and every
// proof of the restored log is against a tree that extends it.
func TestRestoreKeepsTheAuditLog(t *testing.T) {
	target := t.TempDir()
	e := testenv.New(t, testenv.Options{Storage: "[replica]\nto = \"" + target + "\"\nmax_lag = 0\n"})
	k := e.NewKey(e.Tenant("acme"), "write", "audit")
	for range 20 {
		body := apitest.NewVcon(ids.NewRandom().String(), "logged", "+15555550100")
		if r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("POST: %d %s", r.Status, r.Body)
		}
	}
	cp := e.WaitCheckpoint(k.Token, 21) // the key's record and twenty stores
	saved := filepath.Join(t.TempDir(), "checkpoint")
	os.WriteFile(saved, cp, 0o600)
	e.Stop()
	if out, errOut, code := e.TryCLI("audit", "verify", "--admin"); code != 0 {
		t.Fatalf("audit verify --admin before the restore: exit %d %s%s", code, out, errOut)
	}
	for _, f := range []string{"catalog.db", "catalog.db-wal", "catalog.db-shm"} {
		os.Remove(filepath.Join(e.Config.DataDir, f))
	}
	e.CLI("restore")
	if out, errOut, code := e.TryCLI("audit", "verify", "--tenant", "acme", "--checkpoint", saved); code != 0 {
		t.Fatalf("audit verify of the restored catalog: exit %d %s%s", code, out, errOut)
	}
	if out, errOut, code := e.TryCLI("audit", "verify", "--admin"); code != 0 {
		t.Fatalf("audit verify --admin of the restored catalog (with the restore's own records): exit %d %s%s", code, out, errOut)
	}
	e.Start()
	if r := e.Do("GET", "/audit/log/proof?index=20", k.Token, nil); r.Status != 200 {
		t.Fatalf("a proof after the restore: %d %s", r.Status, r.Body)
	}
}

// TestCheckpointWaitsForTheReplica: with a lagging replica a checkpoint
// covers only the records already replicated, so that the host lost with
// records the replica never got still restores to a log that extends
// every checkpoint a tenant was given.
func TestCheckpointWaitsForTheReplica(t *testing.T) {
	target := filepath.Join(t.TempDir(), "replica")
	e := testenv.New(t, testenv.Options{Storage: replicaTOML(target, 60)})
	acme := e.Tenant("acme")
	k := e.NewKey(acme, "write", "audit")
	store := func(n int) {
		for range n {
			body := apitest.NewVcon(ids.NewRandom().String(), "logged", "+15555550100")
			if r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon"); r.Status != 201 {
				t.Fatalf("POST: %d %s", r.Status, r.Body)
			}
		}
	}
	store(5)
	e.WaitCheckpoint(k.Token, 6) // the key's record and five stores

	// The replica's target gone: stores go on within max_lag, but no
	// checkpoint covers them.
	down := func() {
		if err := os.Rename(target, target+".away"); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, []byte("not a directory\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	up := func() {
		if err := os.Remove(target); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(target+".away", target); err != nil {
			t.Fatal(err)
		}
	}
	down()
	store(5)
	time.Sleep(3 * time.Second)
	if cp := e.Do("GET", "/audit/log/checkpoint", k.Token, nil).Body; !strings.Contains(string(cp), "\n6\n") {
		t.Fatalf("with the replica down, the checkpoint covers records it does not hold:\n%s", cp)
	}
	up()
	saved := filepath.Join(t.TempDir(), "checkpoint")
	os.WriteFile(saved, e.WaitCheckpoint(k.Token, 11), 0o600)

	// Down again, three more stores, and the host is lost: the restored
	// log lacks them but extends the checkpoint saved.
	down()
	store(3)
	e.Stop()
	up()
	for _, f := range []string{"catalog.db", "catalog.db-wal", "catalog.db-shm"} {
		os.Remove(filepath.Join(e.Config.DataDir, f))
	}
	e.CLI("restore")
	if out, errOut, code := e.TryCLI("audit", "verify", "--tenant", "acme", "--checkpoint", saved); code != 0 {
		t.Fatalf("audit verify of the restored catalog against the checkpoint saved: exit %d %s%s", code, out, errOut)
	}
	// check says how far each log was restored: the three stores the
	// replica never got had indexes 11 to 13.
	out, errOut, code := e.TryCLI("check")
	var line struct {
		AdminLog struct {
			Restored struct{ Logs map[string]uint64 } `json:"restored"`
		} `json:"admin_log"`
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, `{"admin_log"`) {
			json.Unmarshal([]byte(l), &line)
		}
	}
	if code != 0 || line.AdminLog.Restored.Logs[acme] != 11 {
		t.Fatalf("check after the restore: exit %d, the logs restored %v\n%s%s", code, line.AdminLog.Restored.Logs, out, errOut)
	}
}

// TestRestoreRefusesARolledBackLog: a replica put back to an older copy
// of itself is whole by its own account, but its audit log is behind a
// checkpoint a tenant kept: restore --checkpoint refuses it and restores
// nothing, and takes the copy that extends the checkpoint given.
func TestRestoreRefusesARolledBackLog(t *testing.T) {
	target := filepath.Join(t.TempDir(), "replica")
	e := testenv.New(t, testenv.Options{Storage: replicaTOML(target, 0)})
	k := e.NewKey(e.Tenant("acme"), "write", "audit")
	store := func(n int) {
		for range n {
			body := apitest.NewVcon(ids.NewRandom().String(), "logged", "+15555550100")
			if r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon"); r.Status != 201 {
				t.Fatalf("POST: %d %s", r.Status, r.Body)
			}
		}
	}
	dir := t.TempDir()
	older, newer := filepath.Join(dir, "older"), filepath.Join(dir, "newer")
	store(5)
	os.WriteFile(older, e.WaitCheckpoint(k.Token, 6), 0o600)
	e.Stop()
	if out, err := exec.Command("cp", "-a", target, target+".old").CombinedOutput(); err != nil {
		t.Fatalf("copy the replica: %v %s", err, out)
	}
	e.Start()
	store(5)
	os.WriteFile(newer, e.WaitCheckpoint(k.Token, 11), 0o600)
	e.Stop()
	if err := os.RemoveAll(target); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(target+".old", target); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"catalog.db", "catalog.db-wal", "catalog.db-shm"} {
		os.Remove(filepath.Join(e.Config.DataDir, f))
	}
	_, errOut, code := e.TryCLI("restore", "--checkpoint", newer)
	if code == 0 || !strings.Contains(errOut, "does not extend the checkpoint "+newer) || !strings.Contains(errOut, "nothing was restored") {
		t.Fatalf("restore of the older copy against the newer checkpoint: exit %d %s", code, errOut)
	}
	if left, _ := filepath.Glob(filepath.Join(e.Config.DataDir, "*catalog.db*")); len(left) > 0 {
		t.Fatalf("a refused restore left %v", left)
	}
	e.CLI("restore", "--checkpoint", older)
	if out, errOut, code := e.TryCLI("audit", "verify", "--tenant", "acme", "--checkpoint", older); code != 0 {
		t.Fatalf("audit verify of the restored catalog: exit %d %s%s", code, out, errOut)
	}
	e.Start()
	if r := e.Do("GET", "/audit/log/proof?index=5", k.Token, nil); r.Status != 200 {
		t.Fatalf("a proof after the restore: %d %s", r.Status, r.Body)
	}
}

package webhooks

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
	"github.com/vcon-server/vcon-server/test/kit/webhooktest"
)

// TestRotationReseals: a master-key rotation seals the webhook secrets
// under the new key, so events keep flowing after it.
func TestRotationReseals(t *testing.T) {
	e := testenv.Prepare(t, testenv.Options{Webhooks: fast})
	e.WriteConfig(webhooktest.AllowLoopback)
	k := e.NewKey(e.Tenant("acme"), "write")
	rcv := webhooktest.Start(t, t.TempDir())
	e.CLI("tenant", "set-webhook", "acme", rcv.URL, "--secret-file", rcv.SecretFile, "--ca-file", rcv.CAFile)
	newKey := filepath.Join(e.Dir, "new.key")
	if err := os.WriteFile(newKey, bytes.Repeat([]byte{7}, 32), 0o400); err != nil {
		t.Fatal(err)
	}
	e.CLI("master-key", "rotate", "--new", newKey)
	if err := os.Rename(newKey, e.Config.MasterKey); err != nil {
		t.Fatal(err)
	}
	e.Start()
	u := ids.NewRandom().String()
	if r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(u, "rotated", "+15550100000"), "Content-Type", "application/vcon"); r.Status != 201 {
		t.Fatalf("POST: %d %s", r.Status, r.Body)
	}
	if ev := rcv.WaitFor(t, 1, 20*time.Second); ev[0].Data.UUID != u {
		t.Fatalf("event %+v", ev[0])
	}
}

// TestRotationWhileServing: a rotation beside the running server seals
// the secrets under the new key, and the server, which takes that key
// within a second, goes on delivering with them.
func TestRotationWhileServing(t *testing.T) {
	e := testenv.Prepare(t, testenv.Options{Webhooks: fast})
	e.WriteConfig(webhooktest.AllowLoopback)
	k := e.NewKey(e.Tenant("acme"), "write")
	rcv := webhooktest.Start(t, t.TempDir())
	e.CLI("tenant", "set-webhook", "acme", rcv.URL, "--secret-file", rcv.SecretFile, "--ca-file", rcv.CAFile)
	e.Start()
	newKey := filepath.Join(e.Dir, "new.key")
	if err := os.WriteFile(newKey, bytes.Repeat([]byte{7}, 32), 0o400); err != nil {
		t.Fatal(err)
	}
	e.CLI("master-key", "rotate", "--new", newKey)
	e.WaitLog(0, "serving with the new key")
	u := ids.NewRandom().String()
	if r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(u, "rotated", "+15550100000"), "Content-Type", "application/vcon"); r.Status != 201 {
		t.Fatalf("POST: %d %s", r.Status, r.Body)
	}
	if ev := rcv.WaitFor(t, 1, 20*time.Second); ev[0].Data.UUID != u {
		t.Fatalf("event %+v", ev[0])
	}
}

// TestSecretThatDoesNotOpen: a secret sealed under another master key (a
// rotation cut before it sealed them again) holds the tenant's events,
// with one warning that names no tenant; setting the webhook again sends
// them.
func TestSecretThatDoesNotOpen(t *testing.T) {
	te := setup(t, testenv.Options{Webhooks: fast})
	if _, err := te.e.Daemon.Cat.DB().Exec(`UPDATE webhooks SET secret = randomblob(80)`); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		te.store(t, "POST", "", apitest.NewVcon(ids.NewRandom().String(), "waits", "+15550100000"), 201)
	}
	time.Sleep(1500 * time.Millisecond)
	if a, _, _ := te.rcv.Stats(); a != 0 {
		t.Fatalf("%d deliveries without a secret that opens", a)
	}
	log := te.e.Log.String()
	if n := strings.Count(log, "webhook secret does not open"); n != 1 || strings.Contains(log, te.tenant) {
		t.Fatalf("the warning came %d times (want 1, naming no tenant):\n%s", n, log)
	}
	te.e.CLI("tenant", "set-webhook", "acme", te.rcv.URL, "--secret-file", te.rcv.SecretFile, "--ca-file", te.rcv.CAFile)
	te.rcv.WaitFor(t, 3, 20*time.Second)
}

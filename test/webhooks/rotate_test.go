package webhooks

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
	"github.com/vcon-server/vcon-server/test/kit/webhooktest"
)

// TestRotationReseals: a master-key rotation seals the webhook secrets
// under the new key, so events keep flowing after it.
func TestRotationReseals(t *testing.T) {
	e := testenv.Prepare(t, testenv.Options{Webhooks: fast})
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

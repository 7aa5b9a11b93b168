package reliability

import (
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
	"github.com/vcon-server/vcon-server/test/kit/webhooktest"
)

// rotationWebhook gives the tenant a webhook before a rotation is cut;
// the check it returns, run after the cut, proves its secret still opens:
// the secrets move in the rotation's transaction, so a cut before the
// commit leaves them under the old key with everything else
// (docs/FORMAT.md, "Master-key rotation").
func rotationWebhook(t *testing.T, e *testenv.Env, tenant, token string) func() {
	rcv := webhooktest.Start(t, t.TempDir())
	e.WriteConfig(webhooktest.AllowLoopback)
	e.CLI("tenant", "set-webhook", tenant, rcv.URL, "--secret-file", rcv.SecretFile, "--ca-file", rcv.CAFile)
	return func() {
		t.Helper()
		p := e.StartBinary()
		defer p.Stop()
		u := ids.NewRandom().String()
		if r := e.Do("POST", "/vcons", token, apitest.NewVcon(u, "after the cut", "+15555550100"), "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("POST: %d %s", r.Status, r.Body)
		}
		for _, ev := range rcv.WaitFor(t, 1, 30*time.Second) {
			if ev.Data.UUID == u {
				return
			}
		}
		t.Fatalf("the webhook did not announce the store after the cut rotation")
	}
}

package reliability

import (
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
	"github.com/vcon-server/vcon-server/test/kit/webhooktest"
)

// crashWebhook: the server dies after a receiver took an event and before
// its outbox row is deleted. The next start sends that event again under
// the same webhook-id, so a receiver that keeps each id once has every
// event exactly once (docs/webhooks.md).
func crashWebhook(t *testing.T, c *crashEnv, point string) {
	e := binaryEnv(t, c, false, "", testenv.Options{})
	e.WriteConfig(webhooktest.AllowLoopback)
	k := e.NewKey(e.Tenant("acme"), "write", "read")
	rcv := webhooktest.Start(t, t.TempDir())
	rcv.FailWith(func(int) int { return 500 })
	rcv.HoldCheckpoints(true) // a delivered checkpoint would reach the point first
	e.CLI("tenant", "set-webhook", "acme", rcv.URL, "--secret-file", rcv.SecretFile, "--ca-file", rcv.CAFile)
	a := acked{}
	// No delivery succeeds while the receiver fails, so the process lives
	// through the stores; once it takes them, the first delivery kills it.
	p := e.StartBinary(crashpoint.EnvVar + "=" + point)
	storeSome(t, e, k.Token, 3, a)
	rcv.FailWith(nil)
	deadline := time.Now().Add(time.Minute)
	for !p.Exited() {
		if time.Now().After(deadline) {
			t.Fatalf("the server never reached %s", point)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(rcv.Events()); n == 0 {
		t.Fatalf("the receiver took %d events before the kill", n)
	}
	p = e.StartBinary()
	rcv.WaitFor(t, 3, 30*time.Second)
	p.Stop()
	if _, dups, bad := rcv.Stats(); dups == 0 || len(bad) > 0 {
		t.Fatalf("after the restart: %d events sent again (want some: the kill came before their rows went), %v refused", dups, bad)
	}
	if got := len(rcv.Events()); got != 3 {
		t.Fatalf("the receiver kept %d events, want 3", got)
	}
	recoverAndCheck(t, e, k.Token, a)
}

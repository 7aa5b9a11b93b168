package webhooks

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
	"github.com/vcon-server/vcon-server/test/kit/webhooktest"
)

// TestKilledWithEventsPending: the real binary, SIGKILLed while every
// event waits for a receiver that answers 500, then started again once
// the receiver is back: every event arrives, and at once (the start does
// not wait out the backoff), each under the webhook-id of its attempts.
func TestKilledWithEventsPending(t *testing.T) {
	e := testenv.Prepare(t, testenv.Options{Listen: testenv.FreePort(t)})
	e.WriteConfig(webhooktest.AllowLoopback)
	k := e.NewKey(e.Tenant("acme"), "write")
	rcv := webhooktest.Start(t, t.TempDir())
	rcv.FailWith(func(int) int { return 500 })
	e.CLI("tenant", "set-webhook", "acme", rcv.URL, "--secret-file", rcv.SecretFile, "--ca-file", rcv.CAFile)
	p := e.StartBinary()
	const n = 20
	for i := 0; i < n; i++ {
		u := ids.NewRandom().String()
		if r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(u, "killed", "+15550100000"), "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("POST: %d %s", r.Status, r.Body)
		}
	}
	// Let every event be tried and fail at least once, then cut power.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if a, _, _ := rcv.Stats(); a >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the events were never tried")
		}
	}
	p.Kill()
	if got := len(rcv.Events()); got != 0 {
		t.Fatalf("the receiver took %d events while answering 500", got)
	}
	before := rcv.Asked()
	rcv.FailWith(nil)
	start := time.Now()
	p = e.StartBinary()
	defer p.Stop()
	got := rcv.WaitFor(t, n, 30*time.Second)
	took := time.Since(start)
	// Each event came back under the webhook-id of its failed attempts.
	for _, ev := range got {
		if before[ev.ID] == 0 {
			t.Errorf("event %s arrived under a webhook-id no attempt before the kill had", ev.ID)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if extra := len(rcv.Events()) - n; extra != 0 || len(before) != n {
		t.Errorf("%d events more than stored; %d ids before the kill, want %d", extra, len(before), n)
	}
	if _, _, bad := rcv.Stats(); len(bad) > 0 {
		t.Fatalf("badly signed: %v", bad)
	}
	// The first retry after a failure waits at least half a second; a
	// start sends at once.
	if took > 5*time.Second {
		t.Errorf("the restarted server took %v to deliver the pending events", took)
	}
	t.Logf("%d events pending at the kill, delivered %v after the restart began", n, took.Round(time.Millisecond))
}

// TestCrashAfterCommitKeepsEvent: the server dies right after a store's
// commit, before it answers. The store's event was written in that same
// transaction, so the next start announces it: no change is ever
// committed without its event.
func TestCrashAfterCommitKeepsEvent(t *testing.T) {
	e := testenv.Prepare(t, testenv.Options{Listen: testenv.FreePort(t)})
	e.WriteConfig(webhooktest.AllowLoopback)
	k := e.NewKey(e.Tenant("acme"), "write", "read")
	rcv := webhooktest.Start(t, t.TempDir())
	e.CLI("tenant", "set-webhook", "acme", rcv.URL, "--secret-file", rcv.SecretFile, "--ca-file", rcv.CAFile)
	p := e.StartBinary(crashpoint.EnvVar + "=" + crashpoint.StoreAfterCommit)
	u := ids.NewRandom().String()
	req, _ := http.NewRequest("POST", e.BaseURL+"/vcons", bytes.NewReader(apitest.NewVcon(u, "cut", "+15550100000")))
	req.Header.Set("Authorization", "Bearer "+k.Token)
	req.Header.Set("Content-Type", "application/vcon")
	if resp, err := e.Client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the server answered %d instead of dying after the commit", resp.StatusCode)
	}
	p.Wait()
	p = e.StartBinary()
	defer p.Stop()
	if r := e.Do("GET", "/vcons/"+u, k.Token, nil); r.Status != 200 {
		t.Fatalf("the committed store reads %d", r.Status)
	}
	ev := rcv.WaitFor(t, 1, 20*time.Second)
	if ev[0].Type != "vcon.stored" || ev[0].Data.UUID != u {
		t.Fatalf("event %+v", ev[0])
	}
}

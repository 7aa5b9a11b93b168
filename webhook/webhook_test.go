package webhook

import (
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
)

// TestSignVector: the example the Standard Webhooks libraries test with
// (secret, id, timestamp and body), and its published signature.
func TestSignVector(t *testing.T) {
	key, err := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
}

func TestParseSecret(t *testing.T) {
	for in, want := range map[string]string{
		"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw":             "must start with whsec_",
		"whsec_not base64!":                            "not base64",
		"whsec_c2hvcnQ=":                               "holds 5 bytes",
		"whsec_" + strings.Repeat("QUFB", 22) + "QQ==": "holds 67 bytes",
	} {
		if _, err := ParseSecret(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSecret(%q): %v, want %q", in, err, want)
		}
	}
	if _, err := ParseSecret("  whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n"); err != nil {
		t.Errorf("white space around a secret: %v", err)
	}
}

// TestWait: exponential from First, capped at Max, each wait between half
// of its step and all of it.
func TestWait(t *testing.T) {
	p := Policy{First: time.Second, Max: time.Hour, Attempts: 30}
	for n := 1; n <= 40; n++ {
		step := time.Hour
		if n <= 12 {
			step = time.Second << (n - 1)
		}
		for i := 0; i < 50; i++ {
			if w := p.Wait(n); w < step/2 || w > step {
				t.Fatalf("Wait(%d) = %v, want within [%v, %v]", n, w, step/2, step)
			}
		}
	}
	var total time.Duration
	for n := 1; n < DefaultPolicy.Attempts; n++ {
		total += DefaultPolicy.Wait(n)
	}
	if total < 9*time.Hour || total > 18*time.Hour+10*time.Minute {
		t.Errorf("the default policy gives up after %v; docs/webhooks.md says 9 to 18 hours", total)
	}
}

// TestPayload: ids and a time, nothing else.
func TestPayload(t *testing.T) {
	e := catalog.Event{Type: catalog.EventStored, Tenant: ids.NewRandom(), UUID: ids.NewRandom(), Version: ids.NewV7(time.Now()),
		At: time.Date(2026, 11, 30, 9, 0, 0, 123e6, time.UTC)}
	want := `{"type":"vcon.stored","timestamp":"2026-11-30T09:00:00.123Z","data":{"tenant":"` + e.Tenant.String() +
		`","uuid":"` + e.UUID.String() + `","version":"` + e.Version.String() + `"}}`
	if got := string(Payload(e)); got != want {
		t.Fatalf("payload %s, want %s", got, want)
	}
	er := catalog.Event{Type: catalog.EventErased, Tenant: e.Tenant, Erasure: ids.NewV7(time.Now()), At: e.At}
	want = `{"type":"erasure.completed","timestamp":"2026-11-30T09:00:00.123Z","data":{"tenant":"` + e.Tenant.String() +
		`","erasure":"` + er.Erasure.String() + `"}}`
	if got := string(Payload(er)); got != want {
		t.Fatalf("payload %s, want %s", got, want)
	}
}

// TestCheckpointPayload: the log's origin, size and signed note, which
// hold no vCon content.
func TestCheckpointPayload(t *testing.T) {
	e := catalog.Event{Type: catalog.EventCheckpoint, Tenant: ids.NewRandom(), Size: 12, At: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	note := "vcon.example.com/" + e.Tenant.String() + "\n12\nroot\n\n— sig\n"
	want := `{"type":"audit.checkpoint","timestamp":"2026-11-30T09:00:00Z","data":{"tenant":"` + e.Tenant.String() +
		`","origin":"vcon.example.com/` + e.Tenant.String() + `","size":12,"checkpoint":"vcon.example.com/` + e.Tenant.String() + `\n12\nroot\n\n— sig\n"}}`
	if got := string(CheckpointPayload(e, "vcon.example.com/"+e.Tenant.String(), []byte(note))); got != want {
		t.Fatalf("payload %s, want %s", got, want)
	}
}

package webhooks

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
	"github.com/vcon-server/vcon-server/test/kit/webhooktest"
)

// expiringVcon is a vCon whose lawful basis grants customer_service
// until expires.
func expiringVcon(uuid string, expires time.Time) []byte {
	return []byte(`{"vcon":"0.4.0","uuid":"` + uuid + `","parties":[{"tel":"+15555550142"}],"dialog":[],
	"attachments":[{"purpose":"lawful_basis","party":0,"dialog":0,"encoding":"json","body":{"lawful_basis":"consent",
	"expiration":"` + expires.UTC().Format(time.RFC3339) + `","purpose_grants":[
	{"purpose":"customer_service","granted":true,"granted_at":"2026-01-02T12:00:00Z"}]}}]}`)
}

// TestErasedAtExpiry is issue 29's run of item 3: with skew = 0 and a
// sweep every second, a vCon whose basis expires 10 s after it is stored
// is erased by the first sweep after its expiry, as POST /erasures erases
// uuids: a vcon.expired event, then its vcon.deleted and vcon.purged,
// then erasure.completed; a receipt whose reason is lawful_basis_expired
// that the CLI verifies; the object gone; 410 on a re-store; an erase
// record naming the reason. A held one with the same expiry is left
// until its hold is released, one expiring in 2036 is kept, and so is an
// expired one of a tenant whose mode is off. tenant show names the next
// expiry.
func TestErasedAtExpiry(t *testing.T) {
	e := testenv.Prepare(t, testenv.Options{Webhooks: fast})
	e.WriteConfig(webhooktest.AllowLoopback + "[lawful_basis]\nskew = 0\n")
	conf, err := os.ReadFile(e.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.ConfigPath, bytes.Replace(conf, []byte("purge_interval = 3600"), []byte("purge_interval = 1"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	e.Start()
	rcv := webhooktest.Start(t, t.TempDir())
	tenant, other := e.Tenant("acme"), e.Tenant("other")
	k := e.NewKey(tenant, "write", "read", "delete")
	ko := e.NewKey(other, "write", "read")
	op := e.OperatorKey()
	e.CLI("tenant", "set-webhook", "acme", rcv.URL, "--secret-file", rcv.SecretFile, "--ca-file", rcv.CAFile)
	e.CLI("tenant", "set-lawful-basis", "acme", "enforce")

	expires := time.Now().Add(10 * time.Second).Truncate(time.Second).Add(time.Second)
	a, held, kept, off := ids.NewRandom().String(), ids.NewRandom().String(), ids.NewRandom().String(), ids.NewRandom().String()
	store := func(token, uuid string, body []byte, want int) string {
		t.Helper()
		r := e.Do("POST", "/vcons", token, body, "Content-Type", "application/vcon")
		if r.Status != want {
			t.Fatalf("store %s: %d %s, want %d", uuid, r.Status, r.Body, want)
		}
		var v struct{ Version string }
		json.Unmarshal(r.Body, &v)
		return v.Version
	}
	aVersion := store(k.Token, a, expiringVcon(a, expires), 201)
	store(k.Token, held, expiringVcon(held, expires), 201)
	store(k.Token, kept, expiringVcon(kept, time.Date(2036, 1, 2, 12, 0, 0, 0, time.UTC)), 201)
	store(ko.Token, off, expiringVcon(off, expires), 201)
	if r := e.Do("PUT", "/admin/tenants/"+tenant+"/holds/"+held, op.Token, nil); r.Status != 200 {
		t.Fatalf("hold: %d %s", r.Status, r.Body)
	}
	var shown struct {
		NextExpiry *string `json:"next_expiry"`
	}
	json.Unmarshal([]byte(e.CLI("tenant", "show", "acme")), &shown)
	if shown.NextExpiry == nil || *shown.NextExpiry != expires.UTC().Format(time.RFC3339Nano) {
		t.Errorf("tenant show: next_expiry %v, want %s", shown.NextExpiry, expires.UTC().Format(time.RFC3339Nano))
	}
	objects := e.Count("objects")
	if r := e.Do("GET", "/vcons/"+a, k.Token, nil); r.Status != 200 {
		t.Fatalf("a read before the expiry: %d %s", r.Status, r.Body)
	}

	// Erased by a sweep after its expiry: the vCon's events, then the
	// erasure's.
	evs := rcv.WaitFor(t, 3+4, time.Until(expires)+30*time.Second)
	var erasure string
	var types []string
	for _, ev := range evs {
		if ev.Data.UUID == a || ev.Type == "erasure.completed" {
			types = append(types, ev.Type)
		}
		switch ev.Type {
		case "vcon.expired":
			if ev.Data.UUID != a || ev.Data.Version != aVersion {
				t.Errorf("vcon.expired of %s %s, want only %s %s", ev.Data.UUID, ev.Data.Version, a, aVersion)
			}
		case "erasure.completed":
			erasure = ev.Data.Erasure
		}
	}
	if want := "vcon.stored vcon.expired vcon.deleted vcon.purged erasure.completed"; strings.Join(types, " ") != want {
		t.Fatalf("A's events and the erasure's: %v, want %s", types, want)
	}
	if now := time.Now(); now.Before(expires) {
		t.Fatalf("erased at %s, before the expiry %s", now, expires)
	}
	r := e.Do("GET", "/erasures/"+erasure, k.Token, nil)
	var ans struct {
		State, Reason string
		Erased        []struct{ UUID string }
		Receipt       *string
	}
	r.JSON(t, &ans)
	if r.Status != 200 || ans.State != "done" || ans.Reason != "lawful_basis_expired" || len(ans.Erased) != 1 || ans.Erased[0].UUID != a || ans.Receipt == nil {
		t.Fatalf("GET /erasures/%s: %d %s", erasure, r.Status, r.Body)
	}
	file := filepath.Join(t.TempDir(), "receipt.jws")
	os.WriteFile(file, []byte(*ans.Receipt), 0o600)
	if out, errOut, code := e.TryCLI("erasure", "verify", "--receipt", file); code != 0 || !strings.Contains(out, `"valid":true`) || !strings.Contains(out, `"reason":"lawful_basis_expired"`) {
		t.Errorf("erasure verify: %d %s%s", code, out, errOut)
	}
	if n := e.Count("objects"); n != objects-1 {
		t.Errorf("%d objects after the erasure, want %d", n, objects-1)
	}
	for u, want := range map[string]int{a: 404, held: 200, kept: 200} {
		if r := e.Do("GET", "/vcons/"+u, k.Token, nil); r.Status != want {
			t.Errorf("GET %s after the expiry: %d, want %d", u, r.Status, want)
		}
	}
	if r := e.Do("GET", "/vcons/"+off, ko.Token, nil); r.Status != 200 {
		t.Errorf("the off tenant's expired vCon: %d, want 200 (kept)", r.Status)
	}
	store(k.Token, a, expiringVcon(a, time.Now().Add(time.Hour)), 410)
	audit := e.CLI("audit", "export", "--tenant", "acme")
	if !strings.Contains(audit, `"actor":"server","label":"lawful_basis","action":"erase","target":"erasure=`+erasure+` filter=uuids vcons=1 versions=1 held=0 not_found=0 unsearchable=0 retention=overridden reason=lawful_basis_expired"`) {
		t.Errorf("no erase record naming the reason:\n%s", audit)
	}

	// Released, the held one goes at the next sweep.
	if r := e.Do("DELETE", "/admin/tenants/"+tenant+"/holds/"+held, op.Token, nil); r.Status != 200 {
		t.Fatalf("release: %d %s", r.Status, r.Body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for e.Do("GET", "/vcons/"+held, k.Token, nil).Status != 404 {
		if time.Now().After(deadline) {
			t.Fatal("the released vCon was not erased within 30 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	json.Unmarshal([]byte(e.CLI("tenant", "show", "acme")), &shown)
	if shown.NextExpiry == nil || !strings.HasPrefix(*shown.NextExpiry, "2036-01-02T12:00:00") {
		t.Errorf("tenant show after both: next_expiry %v, want the 2036 one", shown.NextExpiry)
	}
}

// Package webhooks tests the idempotent store and the webhooks end to end:
// the real server, over real TLS, sending to a receiver that fails and
// recovers (docs/webhooks.md).
package webhooks

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
	"github.com/vcon-server/vcon-server/test/kit/webhooktest"
	"github.com/vcon-server/vcon-server/webhook"
)

// fast retries, so a receiver's outage of a second is ridden out quickly.
var fast = webhook.Policy{First: 20 * time.Millisecond, Max: 200 * time.Millisecond, Attempts: 1000, Timeout: 5 * time.Second}

type tenantEnv struct {
	e      *testenv.Env
	rcv    *webhooktest.Receiver
	tenant string
	token  string
}

func setup(t *testing.T, opts testenv.Options) *tenantEnv {
	e := testenv.Prepare(t, opts)
	e.WriteConfig(webhooktest.AllowLoopback)
	e.Start()
	rcv := webhooktest.Start(t, t.TempDir())
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read", "delete")
	out := e.CLI("tenant", "set-webhook", "acme", rcv.URL, "--secret-file", rcv.SecretFile, "--ca-file", rcv.CAFile)
	if !strings.Contains(out, `"webhook":"on"`) || strings.Contains(out, "whsec_") {
		t.Fatalf("set-webhook printed %s", out)
	}
	return &tenantEnv{e: e, rcv: rcv, tenant: tenant, token: k.Token}
}

func (te *tenantEnv) store(t *testing.T, method, uuid string, body []byte, want int) string {
	t.Helper()
	path := "/vcons"
	if method == "PUT" {
		path += "/" + uuid
	}
	r := te.e.Do(method, path, te.token, body, "Content-Type", "application/vcon")
	if r.Status != want {
		t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Body)
	}
	var v struct{ Version string }
	r.JSON(t, &v)
	return v.Version
}

// TestEveryChangeOnceInOrder stores, replaces and deletes (with retention
// 0d, so deletes purge at once) while the receiver answers 500 to its
// first requests and again for a while in the middle: every change
// arrives once (the receiver keeps each webhook-id once), in order per
// vCon, signed, with no byte of content.
func TestEveryChangeOnceInOrder(t *testing.T) {
	te := setup(t, testenv.Options{Webhooks: fast})
	te.e.CLI("tenant", "set-retention", "acme", "0d")
	te.rcv.FailWith(func(n int) int {
		if n <= 5 || (n >= 30 && n < 45) {
			return 500
		}
		return 0
	})
	type change struct{ typ, version string }
	want := map[string][]change{} // uuid → its changes in order
	var secrets []string          // subjects and parties that must never leave
	const n = 24
	uuids := make([]string, n)
	for i := range uuids {
		u := ids.NewRandom().String()
		uuids[i] = u
		subject, tel := fmt.Sprintf("secret subject %d", i), fmt.Sprintf("+1555010%04d", i)
		secrets = append(secrets, subject, tel)
		v := te.store(t, "POST", "", apitest.NewVcon(u, subject, tel), 201)
		want[u] = append(want[u], change{"vcon.stored", v})
	}
	for i := 0; i < 8; i++ {
		u := uuids[i]
		subject := fmt.Sprintf("replaced subject %d", i)
		secrets = append(secrets, subject)
		v := te.store(t, "PUT", u, apitest.NewVcon(u, subject, "+15550200000"), 200)
		want[u] = append(want[u], change{"vcon.replaced", v})
	}
	// A retried store is no change: no event.
	body := apitest.NewVcon(uuids[20], "secret subject 20", "+15550100020")
	if r := te.e.Do("POST", "/vcons", te.token, body, "Content-Type", "application/vcon"); r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retried POST: %d %v %s", r.Status, r.Header, r.Body)
	}
	for _, u := range uuids[4:12] {
		vs := want[u]
		if r := te.e.Do("DELETE", "/vcons/"+u, te.token, nil); r.Status != 204 {
			t.Fatalf("DELETE: %d %s", r.Status, r.Body)
		}
		want[u] = append(want[u], change{"vcon.deleted", vs[len(vs)-1].version})
	}

	total := 0
	for _, cs := range want {
		total += len(cs)
	}
	// Each deleted vCon's versions are purged (key destroyed): one
	// vcon.purged each, and no erasure.completed, which only an erasure
	// for a data subject sends (erasure_test.go).
	purgedWant := map[string]bool{}
	for _, u := range uuids[4:12] {
		for _, c := range want[u] {
			if c.typ != "vcon.deleted" {
				purgedWant[c.version] = true
			}
		}
	}
	total += len(purgedWant)
	got := te.rcv.WaitFor(t, total, 60*time.Second)
	time.Sleep(300 * time.Millisecond) // anything more would be a bug
	got = te.rcv.Events()

	gotBy := map[string][]webhooktest.Event{}
	for _, ev := range got {
		if ev.Data.Tenant != te.tenant {
			t.Errorf("event of tenant %s", ev.Data.Tenant)
		}
		if _, err := time.Parse(time.RFC3339Nano, ev.Timestamp); err != nil {
			t.Errorf("timestamp %q: %v", ev.Timestamp, err)
		}
		gotBy[ev.Data.UUID] = append(gotBy[ev.Data.UUID], ev)
	}
	purged := map[string]bool{}
	for u, cs := range want {
		evs := gotBy[u]
		var main []webhooktest.Event
		for _, ev := range evs {
			switch ev.Type {
			case "vcon.purged":
				if purged[ev.Data.Version] {
					t.Errorf("%s: version %s purged twice", u, ev.Data.Version)
				}
				purged[ev.Data.Version] = true
			case "erasure.completed":
				t.Errorf("%s: erasure.completed without an erasure: %+v", u, ev)
			default:
				main = append(main, ev)
			}
		}
		if len(main) != len(cs) {
			t.Errorf("%s: %d events, want %d: %+v", u, len(main), len(cs), main)
			continue
		}
		for i, c := range cs {
			if main[i].Type != c.typ || main[i].Data.Version != c.version {
				t.Errorf("%s: event %d is %s %s, want %s %s", u, i, main[i].Type, main[i].Data.Version, c.typ, c.version)
			}
		}
	}
	for v := range purgedWant {
		if !purged[v] {
			t.Errorf("version %s: no vcon.purged", v)
		}
	}
	if len(got) != total {
		t.Errorf("the receiver took %d events, want %d", len(got), total)
	}
	attempts, dups, bad := te.rcv.Stats()
	if len(bad) > 0 {
		t.Errorf("deliveries whose signature did not verify: %v", bad)
	}
	raw := te.rcv.Raw()
	for _, s := range secrets {
		if strings.Contains(raw, s) {
			t.Errorf("a delivery holds %q", s)
		}
	}
	for _, s := range []string{"Test Caller", "dialog", "parties", "subject"} {
		if strings.Contains(raw, s) {
			t.Errorf("a delivery holds %q", s)
		}
	}
	ops := te.e.OperatorKey()
	// The log's audit.checkpoint events are delivered too, kept apart by
	// the receiver.
	var m string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n := len(te.rcv.Checkpoints())
		m = string(te.e.Do("GET", "/metrics", ops.Token, nil).Body)
		want := `vcon_webhook_attempts_total{outcome="delivered"} ` + strconv.Itoa(total+dups+n) + "\n"
		if strings.Contains(m, "vcon_webhook_events_pending 0\n") && strings.Contains(m, "vcon_webhook_events_failed 0\n") && strings.Contains(m, want) && n == len(te.rcv.Checkpoints()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %q and no pending or failed event:\n%s", want, m)
		}
	}
	if !strings.Contains(m, "vcon_webhook_delivery_seconds_count") {
		t.Errorf("/metrics lacks the delivery latency")
	}
	log := te.e.Log.String()
	for _, id := range append([]string{te.tenant}, uuids...) {
		if strings.Contains(log, id) {
			t.Errorf("the log names %s", id)
		}
	}
	t.Logf("events %d, requests %d (answered 500: 20), duplicates %d", total, attempts, dups)
}

// TestFailedThenRetried: a receiver that never answers 2xx gets each event
// Attempts times; the events are then failed, listed by webhook failed,
// and sent again by webhook retry once the receiver is back.
func TestFailedThenRetried(t *testing.T) {
	te := setup(t, testenv.Options{Webhooks: webhook.Policy{First: 10 * time.Millisecond, Max: 20 * time.Millisecond, Attempts: 3, Timeout: 5 * time.Second}})
	te.rcv.FailWith(func(int) int { return 503 })
	var versions []string
	for i := 0; i < 3; i++ {
		versions = append(versions, te.store(t, "POST", "", apitest.NewVcon(ids.NewRandom().String(), "s", "+15550100000"), 201))
	}
	var failed []map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for len(failed) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("failed events: %v", failed)
		}
		time.Sleep(50 * time.Millisecond)
		failed = nil
		for _, line := range strings.Split(strings.TrimSpace(te.e.CLI("webhook", "failed", "--tenant", "acme")), "\n") {
			if line == "" {
				continue
			}
			var f map[string]any
			if err := json.Unmarshal([]byte(line), &f); err != nil {
				t.Fatal(err)
			}
			failed = append(failed, f)
		}
	}
	for i, f := range failed {
		if f["type"] != "vcon.stored" || f["version"] != versions[i] || f["attempts"] != 3.0 || f["error"] != "answered 503" || !strings.HasPrefix(f["id"].(string), "msg_") {
			t.Errorf("failed event %d: %v", i, f)
		}
	}
	if attempts, _, _ := te.rcv.Stats(); attempts != 9 {
		t.Errorf("the receiver was asked %d times, want 3 events × 3 attempts", attempts)
	}
	ops := te.e.OperatorKey()
	waitMetrics(t, te.e, ops.Token, "vcon_webhook_events_failed 3")
	te.rcv.FailWith(nil)
	if out := te.e.CLI("webhook", "retry", "--tenant", "acme"); !strings.Contains(out, `"retried":3`) {
		t.Fatalf("webhook retry: %s", out)
	}
	got := te.rcv.WaitFor(t, 3, 30*time.Second)
	taken := map[any]bool{}
	for _, f := range failed {
		taken[f["id"]] = true
	}
	for i, ev := range got {
		if !taken[ev.ID] {
			t.Errorf("retried event %d has webhook-id %s, none of the failed ones' %v", i, ev.ID, taken)
		}
	}
	if out := te.e.CLI("webhook", "failed", "--tenant", "acme"); out != "" {
		t.Errorf("failed events remain: %s", out)
	}
}

// TestOffDropsPending: turning a webhook off drops its pending events, and
// says how many in its answer and in the audit log.
func TestOffDropsPending(t *testing.T) {
	te := setup(t, testenv.Options{Webhooks: webhook.Policy{First: time.Hour, Max: time.Hour, Attempts: 5, Timeout: 5 * time.Second}})
	te.rcv.FailWith(func(int) int { return 500 })
	for i := 0; i < 4; i++ {
		te.store(t, "POST", "", apitest.NewVcon(ids.NewRandom().String(), "s", "+15550100000"), 201)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if a, _, _ := te.rcv.Stats(); a >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no attempts")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ops := te.e.OperatorKey()
	r := te.e.Do("PUT", "/admin/tenants/"+te.tenant+"/webhook", ops.Token, []byte(`{"url":"off"}`), "Content-Type", "application/json")
	if r.Status != 200 || !strings.Contains(string(r.Body), `"dropped":4`) {
		t.Fatalf("off: %d %s", r.Status, r.Body)
	}
	audit := te.e.CLI("audit", "export", "--tenant", "acme")
	if !strings.Contains(audit, `"action":"webhook","target":"off dropped=4"`) {
		t.Errorf("the audit log lacks the dropped events:\n%s", audit)
	}
	te.store(t, "POST", "", apitest.NewVcon(ids.NewRandom().String(), "s", "+15550100000"), 201)
	waitMetrics(t, te.e, ops.Token, "vcon_webhook_events_pending 0")
}

// TestSettingRefusals: what set-webhook and its route refuse.
func TestSettingRefusals(t *testing.T) {
	te := setup(t, testenv.Options{Webhooks: fast})
	dir := t.TempDir()
	loose := dir + "/loose.secret"
	os.WriteFile(loose, []byte(te.rcv.Secret), 0o644)
	short := dir + "/short.secret"
	os.WriteFile(short, []byte("whsec_c2hvcnQ="), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"http://example.com/hook", "--secret-file", te.rcv.SecretFile}, "use https"},
		{[]string{"ftp://127.0.0.1/hook", "--secret-file", te.rcv.SecretFile}, "must be https"},
		{[]string{te.rcv.URL, "--secret-file", loose}, "readable by group or others"},
		{[]string{te.rcv.URL, "--secret-file", short}, "holds 5 bytes of key"},
		{[]string{te.rcv.URL}, "needs --secret-file"},
		{[]string{te.rcv.URL, "--secret-file", te.rcv.SecretFile, "--ca-file", loose}, "no PEM certificate"},
		// Where events may not go (webhook/guard_test.go tries every class).
		{[]string{"https://169.254.169.254/latest", "--secret-file", te.rcv.SecretFile}, "names a link-local address, which webhooks may not reach"},
		{[]string{"https://[::ffff:10.0.0.1]/h", "--secret-file", te.rcv.SecretFile}, "names a private address"},
		{[]string{"https://[64:ff9b::a9fe:a9fe]/h", "--secret-file", te.rcv.SecretFile}, "names a link-local address"},
		{[]string{"https://127.0.0.2:8443/h", "--secret-file", te.rcv.SecretFile}, "names a loopback address"},
		{[]string{"http://127.0.0.2:8990/h", "--secret-file", te.rcv.SecretFile}, "allow does not list"},
		{[]string{"https://hooks.example.com:0/h", "--secret-file", te.rcv.SecretFile}, "has port 0; a port is 1 to 65535"},
		{[]string{"https://hooks.example.com:99999/h", "--secret-file", te.rcv.SecretFile}, "has port 99999"},
	} {
		_, stderr, code := te.e.TryCLI(append([]string{"tenant", "set-webhook", "acme"}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("set-webhook %v: exit %d, %s; want %q", c.args, code, stderr, c.want)
		}
	}
	if out := te.e.CLI("tenant", "set-webhook", "acme", "http://127.0.0.1:9/hook", "--secret-file", te.rcv.SecretFile); !strings.Contains(out, `"url":"http://127.0.0.1:9/hook"`) {
		t.Errorf("http to loopback: %s", out)
	}
	ops := te.e.OperatorKey()
	for body, want := range map[string]string{
		`{"url":"https://example.com/h","secret":"nope"}`:                  "must start with whsec_",
		`{"url":"http://10.0.0.1/h","secret":"` + te.rcv.Secret + `"}`:     "use https",
		`{"url":"https://example.com/h","secret":"` + te.rcv.Secret + `"`:  "must be a JSON object",
		`{"url":"https://10.0.0.1/h","secret":"` + te.rcv.Secret + `"}`:    "names a private address",
		`{"url":"https://[fd00::1]/h","secret":"` + te.rcv.Secret + `"}`:   "names a unique-local address",
		`{"url":"https://0.0.0.0:22/h","secret":"` + te.rcv.Secret + `"}`:  "names an unspecified address",
		`{"url":"https://h.example:0/h","secret":"` + te.rcv.Secret + `"}`: "has port 0",
	} {
		r := te.e.Do("PUT", "/admin/tenants/"+te.tenant+"/webhook", ops.Token, []byte(body), "Content-Type", "application/json")
		if r.Status != 400 || !strings.Contains(string(r.Body), want) {
			t.Errorf("PUT %s: %d %s; want 400 %q", body, r.Status, r.Body, want)
		}
	}
	r := te.e.Do("PUT", "/admin/tenants/"+te.tenant+"/webhook", ops.Token,
		[]byte(`{"url":"`+te.rcv.URL+`","secret":"`+te.rcv.Secret+`"}`), "Content-Type", "application/json")
	if r.Status != 200 || strings.Contains(string(r.Body), "whsec_") {
		t.Errorf("PUT: %d %s", r.Status, r.Body)
	}
}

// waitMetrics waits until /metrics shows every line (the gauges are
// counted once a second) and returns the page.
// waitFailed waits up to 10 s until webhook failed lists n events of
// type typ failed with why (the log's audit.checkpoint events may fail
// beside them), and returns its output.
func waitFailed(t *testing.T, te *tenantEnv, typ, why string, n int) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out := te.e.CLI("webhook", "failed", "--tenant", "acme")
		got := 0
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, `"type":"`+typ+`"`) && strings.Contains(l, why) {
				got++
			}
		}
		if got == n {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhook failed lists %d %s events with %s, want %d:\n%s", got, typ, why, n, out)
		}
	}
}

func waitMetrics(t *testing.T, e *testenv.Env, token string, lines ...string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := string(e.Do("GET", "/metrics", token, nil).Body)
		missing := ""
		for _, l := range lines {
			if !strings.Contains(m, l+"\n") {
				missing = l
			}
		}
		if missing == "" {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %q", missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSlowEndpointHoldsOnlyItsTenant: one tenant with 150 untried events
// behind an endpoint that never answers in time holds back that tenant's
// events only: another tenant's arrive meanwhile, within one attempt's
// timeout (the sender read the outbox in (next_at, id) order and skipped
// the saturated tenant's rows, so 68 of them hid every other tenant's
// for the time their backlog took).
func TestSlowEndpointHoldsOnlyItsTenant(t *testing.T) {
	timeout := 2 * time.Second
	te := setup(t, testenv.Options{Webhooks: webhook.Policy{First: time.Minute, Max: time.Minute, Attempts: 30, Timeout: timeout}})
	slow := make(chan struct{})
	defer close(slow)
	te.rcv.FailWith(func(int) int { <-slow; return 0 })
	other := webhooktest.Start(t, t.TempDir())
	k := te.e.NewKey(te.e.Tenant("globex"), "write")
	te.e.CLI("tenant", "set-webhook", "globex", other.URL, "--secret-file", other.SecretFile, "--ca-file", other.CAFile)
	// Far more than the 68 due events the sender read at a time, however
	// many of them fail while the rest are stored.
	for i := 0; i < 150; i++ {
		te.store(t, "POST", "", apitest.NewVcon(ids.NewRandom().String(), "slow", "+15550100000"), 201)
	}
	start := time.Now()
	for i := 0; i < 10; i++ {
		if r := te.e.Do("POST", "/vcons", k.Token, apitest.NewVcon(ids.NewRandom().String(), "other", "+15550100000"), "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("POST: %d", r.Status)
		}
	}
	// One attempt's timeout, and as much again for a loaded CI machine.
	other.WaitFor(t, 10, 2*timeout)
	if n := len(te.rcv.Events()); n != 0 {
		t.Fatalf("the slow endpoint took %d events", n)
	}
	t.Logf("the other tenant's 10 events arrived in %v behind 150 on an endpoint that times out after %v", time.Since(start).Round(time.Millisecond), timeout)
}

// TestDeliveriesToItself: a webhook pointed at the server itself gets 401
// for each delivery (it sends no key), and those never count as failed
// authentications: the address is not blocked, and /health and
// /openapi.json answer every client behind it.
func TestDeliveriesToItself(t *testing.T) {
	te := setup(t, testenv.Options{Webhooks: webhook.Policy{First: time.Millisecond, Max: time.Millisecond, Attempts: 1, Timeout: 5 * time.Second}})
	port := te.e.BaseURL[strings.LastIndex(te.e.BaseURL, ":")+1:]
	te.e.CLI("tenant", "set-webhook", "acme", "https://localhost:"+port+"/vcons", "--secret-file", te.rcv.SecretFile, "--ca-file", te.e.Config.TLS.Cert)
	const n = 30 // more than the 20 failures a minute that block an address
	for i := 0; i < n; i++ {
		te.store(t, "POST", "", apitest.NewVcon(ids.NewRandom().String(), "self", "+15550100000"), 201)
	}
	waitFailed(t, te, "vcon.stored", `"error":"answered 401"`, n)
	for _, path := range []string{"/health", "/openapi.json"} {
		if r := te.e.Do("GET", path, "", nil); r.Status != 200 {
			t.Errorf("GET %s without a key after %d deliveries to itself: %d %s", path, n, r.Status, r.Body)
		}
	}
}

// TestStoredBeforeTheRules: a webhook set while its address was allowed
// stays set once the configuration no longer allows it; its events fail
// at once, not sent, with the rule and no address, as webhook failed and
// tenant show say.
func TestStoredBeforeTheRules(t *testing.T) {
	te := setup(t, testenv.Options{Webhooks: fast})
	te.e.Stop()
	te.e.WriteConfig("") // no [webhooks] allow: 127.0.0.1 is refused
	te.e.Start()
	for i := 0; i < 2; i++ {
		te.store(t, "POST", "", apitest.NewVcon(ids.NewRandom().String(), "refused", "+15550100000"), 201)
	}
	out := waitFailed(t, te, "vcon.stored", `"error":"address not allowed: a loopback address"`, 2)
	if strings.Contains(out, "127.0.0.1") {
		t.Errorf("webhook failed:\n%s", out)
	}
	var shown struct {
		Webhook struct{ URL, Refused string }
	}
	if err := json.Unmarshal([]byte(te.e.CLI("tenant", "show", "acme")), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.Webhook.URL != te.rcv.URL || !strings.Contains(shown.Webhook.Refused, "names a loopback address, which webhooks may not reach") {
		t.Errorf("tenant show: %+v", shown)
	}
	if attempts, _, _ := te.rcv.Stats(); attempts != 0 {
		t.Errorf("the receiver was asked %d times", attempts)
	}
}

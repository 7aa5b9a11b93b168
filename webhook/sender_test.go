package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/metrics"
	"github.com/vcon-server/vcon-server/seal"
	"github.com/vcon-server/vcon-server/test/kit/archivetest"
)

// rig is a sender over a real catalog, its receivers on loopback.
type rig struct {
	t   *testing.T
	cat *catalog.Catalog
	mk  *seal.MasterKey
	s   *Sender
	log *syncBuf
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) { b.mu.Lock(); defer b.mu.Unlock(); return b.b.Write(p) }
func (b *syncBuf) String() string              { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

var loopback = Rules{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

func newRig(t *testing.T, p Policy, r Rules) *rig {
	k := archivetest.Keyed(t, archivetest.MasterKey(t, 1))
	cat, mk := k.Cat, k.Key
	log := &syncBuf{}
	s := &Sender{Cat: cat, Key: mk, Log: slog.New(slog.NewTextHandler(log, nil)), Metrics: NewMetrics(metrics.NewRegistry()),
		Policy: p, Rules: r, Now: time.Now}
	return &rig{t: t, cat: cat, mk: mk, s: s, log: log}
}

// tenant makes a tenant whose webhook goes to url, its secret sealed
// under sealer (the rig's key, or another: a secret that does not open).
func (r *rig) tenant(name, url string, sealer *seal.MasterKey) ids.ID {
	ctx := context.Background()
	var tn catalog.Tenant
	if err := r.cat.Update(ctx, func(tx *catalog.Tx) error {
		var err error
		tn, err = tx.CreateTenant(name)
		return err
	}); err != nil {
		r.t.Fatal(err)
	}
	sealed, err := sealer.SealSecret(tn.ID, []byte(testSecret))
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.cat.SetWebhook(ctx, catalog.Webhook{Tenant: tn.ID, URL: url, Secret: sealed}, catalog.CLI); err != nil {
		r.t.Fatal(err)
	}
	return tn.ID
}

// events stores n new vCons of tenant in one commit: n vcon.stored events.
func (r *rig) events(tenant ids.ID, n int) {
	err := r.cat.Update(context.Background(), func(tx *catalog.Tx) error {
		for range n {
			v := catalog.Version{ID: ids.NewV7(time.Now()), Tenant: tenant, UUID: ids.NewRandom(), StoredAt: time.Now(),
				ContentType: "application/vcon", Form: "unsigned", Location: catalog.InDir, WrappedKey: make([]byte, 61)}
			if _, err := tx.InsertVersion(v, catalog.CreateOnly); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.s.Run(ctx); close(done) }()
	r.t.Cleanup(func() { cancel(); <-done })
}

// receiver takes deliveries on loopback (plain http: allowed loopback);
// slow ones hold each request until the sender gives up on it.
type receiver struct {
	srv      *httptest.Server
	got      atomic.Int64
	inflight atomic.Int64
}

func newReceiver(t *testing.T, slow bool) *receiver {
	rc := &receiver{}
	stop := make(chan struct{})
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rc.inflight.Add(1)
		defer rc.inflight.Add(-1)
		if slow {
			io.Copy(io.Discard, req.Body) // so that the sender's giving up ends the request's context
			select {
			case <-req.Context().Done():
			case <-stop:
			}
			return
		}
		var b Body
		if json.NewDecoder(req.Body).Decode(&b) == nil {
			rc.got.Add(1)
		}
		w.WriteHeader(204)
	}))
	t.Cleanup(func() { close(stop); rc.srv.Close() })
	return rc
}

func waitFor(t *testing.T, what string, within time.Duration, ok func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !ok() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// TestFairAcrossTenants: two tenants with 70 untried events each behind
// endpoints that never answer hold every worker; another tenant's event
// is delivered when the first attempt times out, not after their
// backlogs (about 140 × timeout / 8 before the outbox was read in turn
// by tenant). The bound is one attempt's timeout, plus slack for CI.
func TestFairAcrossTenants(t *testing.T) {
	timeout := 1500 * time.Millisecond
	r := newRig(t, Policy{First: time.Minute, Max: time.Minute, Attempts: 30, Timeout: timeout}, loopback)
	slow1, slow2, fast := newReceiver(t, true), newReceiver(t, true), newReceiver(t, false)
	a := r.tenant("slow-1", slow1.srv.URL, r.mk)
	b := r.tenant("slow-2", slow2.srv.URL, r.mk)
	c := r.tenant("fast", fast.srv.URL, r.mk)
	r.events(a, 70)
	r.events(b, 70)
	r.run()
	waitFor(t, "every worker on the slow endpoints", 10*time.Second, func() bool {
		return slow1.inflight.Load()+slow2.inflight.Load() == workers
	})
	r.events(c, 1)
	took := waitFor(t, "the other tenant's event", timeout+3*time.Second, func() bool { return fast.got.Load() == 1 })
	t.Logf("another tenant's event delivered in %v behind 140 events on endpoints that time out after %v", took.Round(time.Millisecond), timeout)
}

// TestParkedDoesNotBlock: a tenant whose secret does not open (sealed
// under another master key) is parked at once, its 80 events waiting,
// never attempted, and read no more: another tenant's events pass, and
// the sender does not retry the secret in a loop.
func TestParkedDoesNotBlock(t *testing.T) {
	r := newRig(t, Policy{First: time.Minute, Max: time.Minute, Attempts: 30, Timeout: 5 * time.Second}, loopback)
	rcv := newReceiver(t, false)
	broken := r.tenant("broken", rcv.srv.URL, archivetest.MasterKey(t, 2))
	r.events(broken, 80)
	ok := r.tenant("ok", rcv.srv.URL, r.mk)
	r.events(ok, 5)
	r.run()
	waitFor(t, "the other tenant's 5 events", 5*time.Second, func() bool { return rcv.got.Load() == 5 })
	r.events(ok, 5)
	waitFor(t, "5 more", 5*time.Second, func() bool { return rcv.got.Load() == 10 })
	time.Sleep(1500 * time.Millisecond) // a loop would warn again meanwhile
	ctx := context.Background()
	w, err := r.cat.Webhook(ctx, broken)
	if err != nil || !strings.Contains(w.Parked, "does not open") {
		t.Fatalf("the broken webhook: %q, %v", w.Parked, err)
	}
	if n := strings.Count(r.log.String(), "does not open with this master key"); n != 1 {
		t.Errorf("warned %d times, want once:\n%s", n, r.log.String())
	}
	if pending, failed, err := r.cat.EventCounts(ctx); err != nil || pending != 80 || failed != 0 {
		t.Errorf("outbox: %d pending, %d failed (%v); want the parked tenant's 80 pending", pending, failed, err)
	}
	evs, err := r.cat.DueEvents(ctx, time.Now(), ids.ID{}, perTenant, 100)
	if err != nil || len(evs) != 0 {
		t.Errorf("due: %d events (%v), want none while parked", len(evs), err)
	}
	// Set again, it is parked no more.
	sealed, _ := r.mk.SealSecret(broken, []byte(testSecret))
	if err := r.cat.SetWebhook(ctx, catalog.Webhook{Tenant: broken, URL: rcv.srv.URL, Secret: sealed}, catalog.CLI); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the parked tenant's 80 events once set again", 10*time.Second, func() bool { return rcv.got.Load() == 90 })
}

// TestRefusedFailsAtOnce: a webhook stored before the rules that refuse
// its URL keeps its place, and its events fail at once with the rule (no
// address); one whose name resolves to a refused address (localhost,
// loopback not allowed) fails at the dial, no connection made.
func TestRefusedFailsAtOnce(t *testing.T) {
	r := newRig(t, Policy{First: time.Minute, Max: time.Minute, Attempts: 30, Timeout: 5 * time.Second}, Rules{})
	srv, conns := counting(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }), true)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	private := r.tenant("private", "https://10.0.0.1/h", r.mk)
	named := r.tenant("named", "https://localhost:"+port+"/h", r.mk)
	r.events(private, 3)
	r.events(named, 3)
	r.run()
	ctx := context.Background()
	var evs []catalog.Event
	waitFor(t, "6 failed events", 10*time.Second, func() bool {
		a, _ := r.cat.FailedEvents(ctx, private)
		b, _ := r.cat.FailedEvents(ctx, named)
		evs = append(a, b...)
		return len(evs) == 6
	})
	for _, e := range evs {
		want := "no answer: address not allowed"
		if e.Tenant == private {
			want = "address not allowed: a private address"
		}
		if !strings.HasPrefix(e.Error, want) || e.Attempts != 1 || strings.Contains(e.Error, port) || strings.Contains(e.Error, "10.0.0.1") {
			t.Errorf("failed event: %q after %d attempts, want %q after 1", e.Error, e.Attempts, want)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("%d connections made", n)
	}
	if log := r.log.String(); strings.Contains(log, port) || strings.Contains(log, "10.0.0.1") || strings.Contains(log, "127.0.0.1") {
		t.Errorf("the log names an address:\n%s", log)
	}
}

package webhooks

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestErasureOnceAfterItsPurges: an erasure for a data subject sends one
// erasure.completed, naming the erasure and the tenant only, and only
// after the vcon.purged events of every vCon it purged, although those
// queue behind their vCons' earlier events while the receiver fails and
// the erasure's own event does not; a vCon it left alone holds nothing.
func TestErasureOnceAfterItsPurges(t *testing.T) {
	te := setup(t, testenv.Options{Webhooks: fast})
	var failing atomic.Bool
	failing.Store(true)
	te.rcv.FailWith(func(int) int {
		if failing.Load() {
			return 500
		}
		return 0
	})
	a, b, c := ids.NewRandom().String(), ids.NewRandom().String(), ids.NewRandom().String()
	te.store(t, "POST", "", apitest.NewVcon(a, "erased subject a", "+15550300001"), 201)
	te.store(t, "POST", "", apitest.NewVcon(b, "erased subject b", "+15550300002"), 201)
	te.store(t, "PUT", b, apitest.NewVcon(b, "erased subject b again", "+15550300002"), 200)
	te.store(t, "POST", "", apitest.NewVcon(c, "kept subject", "+15550300003"), 201)
	r := te.e.Do("POST", "/erasures", te.token, []byte(`{"uuids":["`+a+`","`+b+`"]}`), "Content-Type", "application/json")
	if r.Status != 200 {
		t.Fatalf("POST /erasures: %d %s", r.Status, r.Body)
	}
	var er struct{ Erasure, State string }
	r.JSON(t, &er)
	if er.State != "done" {
		t.Fatalf("erasure %+v", er)
	}
	failing.Store(false)
	// a: stored, deleted, purged; b: stored, replaced, deleted, purged ×2;
	// c: stored; the erasure: one.
	const total = 3 + 5 + 1 + 1
	te.rcv.WaitFor(t, total, 60*time.Second)
	time.Sleep(300 * time.Millisecond) // anything more would be a bug
	got := te.rcv.Events()
	if len(got) != total {
		t.Fatalf("the receiver took %d events, want %d: %+v", len(got), total, got)
	}
	purged := map[string]int{}
	erasures := 0
	for i, ev := range got {
		switch ev.Type {
		case "vcon.purged":
			purged[ev.Data.UUID]++
		case "erasure.completed":
			erasures++
			if ev.Data.Erasure != er.Erasure || ev.Data.Tenant != te.tenant || ev.Data.UUID != "" || ev.Data.Version != "" {
				t.Errorf("erasure.completed %+v, want erasure %s of tenant %s and no uuid nor version", ev.Data, er.Erasure, te.tenant)
			}
			if purged[a] != 1 || purged[b] != 2 {
				t.Errorf("erasure.completed came as event %d, before every vcon.purged of its vCons: %v", i, purged)
			}
		}
	}
	if erasures != 1 || purged[c] != 0 {
		t.Errorf("%d erasure.completed (want 1); purged %v", erasures, purged)
	}
	raw := te.rcv.Raw()
	for _, s := range []string{"subject", "+1555030000", "1555030000"} {
		if strings.Contains(raw, s) {
			t.Errorf("a delivery holds %q", s)
		}
	}
	if strings.Count(raw, `"erasure":"`+er.Erasure+`"`) == 0 {
		t.Errorf("no delivery names the erasure")
	}
}

package server_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/server"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// largeAnswer is an erasure's answer with its paging and counts.
type largeAnswer struct {
	erasureAnswer
	NotFound int     `json:"not_found"`
	Next     *string `json:"next"`
	Digest   *struct {
		SHA256                 string
		Erased, Versions, Held int
	} `json:"digest"`
}

func uuidsBody(uuids []string) []byte {
	return []byte(`{"uuids":["` + strings.Join(uuids, `","`) + `"]}`)
}

func newUUIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = ids.NewRandom().String()
	}
	return out
}

// TestErasureLarge: an erasure of held, stored and never-stored uuids
// counts the never-stored ones in not_found and lists none of them (a
// later store of one is not refused); past 100 entries its receipt
// carries the SHA-256 of its lists instead, which the answer's pages,
// 1,000 entries each and the same each time, recompute as docs/erasure.md
// says.
func TestErasureLarge(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	rw := e.NewKey(tenant, "write", "read")
	del := e.NewKey(tenant, "delete")
	op := e.OperatorKey()
	stored, held, never := newUUIDs(20), newUUIDs(1100), newUUIDs(500)
	for _, u := range stored {
		storeVcon(t, e, "POST", "/vcons", rw.Token, apitest.NewVcon(u, "large", partyTel), 201)
	}
	for _, u := range held { // a hold may come before its vCon
		if r := e.Do("PUT", "/admin/tenants/"+tenant+"/holds/"+u, op.Token, nil); r.Status != 200 {
			t.Fatalf("hold: %d %s", r.Status, r.Body)
		}
	}
	all := slices.Concat(stored, held, never)
	r := e.Do("POST", "/erasures", del.Token, uuidsBody(all), "Content-Type", "application/json")
	if r.Status != 200 {
		t.Fatalf("POST /erasures: %d %s", r.Status, r.Body)
	}
	var first largeAnswer
	r.JSON(t, &first)
	if first.State != "done" || first.NotFound != len(never) || first.Next == nil || first.Digest == nil ||
		*first.Digest != (struct {
			SHA256                 string
			Erased, Versions, Held int
		}{first.Digest.SHA256, len(stored), len(stored), len(held)}) {
		t.Fatalf("answer: state %s, not_found %d, next %v, digest %+v", first.State, first.NotFound, first.Next, first.Digest)
	}
	// Page by page, as a client would, twice: the same bytes each time.
	var lines []string
	var heldLines []string
	pages := []string{"/erasures/" + first.Erasure}
	for i := 0; i < len(pages); i++ {
		r := e.Do("GET", pages[i], del.Token, nil)
		// A checkpoint may cover the erase record between the two: its
		// proof is then in the second answer only.
		if again := e.Do("GET", pages[i], del.Token, nil); r.Status != 200 || !bytes.Equal(apitest.WithoutProof(t, again.Body), apitest.WithoutProof(t, r.Body)) {
			t.Fatalf("GET %s: %d, and again not the same", pages[i], r.Status)
		}
		var a largeAnswer
		r.JSON(t, &a)
		if n := len(a.Erased) + len(a.Held); n > 1000 || (a.Next != nil && n != 1000) {
			t.Fatalf("page %d lists %d entries, next %v", i, n, a.Next)
		}
		for _, it := range a.Erased {
			lines = append(lines, fmt.Sprintf("erased %s %d %v\n", it.UUID, it.Versions, it.Whole))
		}
		for _, u := range a.Held {
			heldLines = append(heldLines, "held "+u+"\n")
		}
		if a.Next != nil {
			pages = append(pages, *a.Next)
		}
	}
	if len(pages) != 2 || len(lines) != len(stored) || len(heldLines) != len(held) {
		t.Fatalf("%d pages, %d erased, %d held", len(pages), len(lines), len(heldLines))
	}
	sum := sha256.Sum256([]byte(strings.Join(lines, "") + strings.Join(heldLines, "")))
	parts := strings.Split(*first.Receipt, ".")
	pb, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var p map[string]any
	json.Unmarshal(pb, &p)
	d, _ := p["digest"].(map[string]any)
	if d["sha256"] != hex.EncodeToString(sum[:]) || d["sha256"] != first.Digest.SHA256 || p["erased"] != nil || p["held"] != nil ||
		p["not_found"] != float64(len(never)) {
		t.Fatalf("the receipt's payload %s; the pages' digest %x", pb, sum)
	}
	if len(pb) > 2000 {
		t.Errorf("a receipt of %d bytes for a digest", len(pb))
	}
	// A never-stored uuid is stored later; an erased one is refused.
	storeVcon(t, e, "POST", "/vcons", rw.Token, apitest.NewVcon(never[0], "later", otherTel), 201)
	storeVcon(t, e, "POST", "/vcons", rw.Token, apitest.NewVcon(stored[0], "again", otherTel), 410)
	if r := e.Do("GET", "/erasures/"+first.Erasure+"?after=nope", del.Token, nil); r.Status != 400 {
		t.Errorf("a cursor that is not a uuid: %d %s", r.Status, r.Body)
	}
}

// TestErasureBodies: POST /erasures takes application/json only, one JSON
// object and nothing after it, no member twice; each refusal says why and
// changes nothing. Past the tenant's budget, 429 with Retry-After.
func TestErasureBodies(t *testing.T) {
	e := testenv.New(t, testenv.Options{Limits: server.Limits{ErasePerMinute: 100}})
	tenant := e.Tenant("acme")
	del := e.NewKey(tenant, "delete")
	u := ids.NewRandom().String()
	for _, c := range []struct {
		ct, body, says string
		status         int
	}{
		{"", `{"uuids":["` + u + `"]}`, "Content-Type: application/json", 415},
		{"application/vcon", `{"uuids":["` + u + `"]}`, "Content-Type: application/json", 415},
		{"application/json", `{"uuids":["` + u + `"]} {"tel":"+15555550100"}`, "end of input", 400},
		{"application/json", `{"uuids":["` + u + `"]}]`, "end of input", 400},
		{"application/json", `{"uuids":["` + u + `"],"uuids":[]}`, "duplicate member uuids", 400},
		{"application/json", `{"tel":"+15555550100","tel":"+15555550101"}`, "duplicate member tel", 400},
	} {
		r := e.Do("POST", "/erasures", del.Token, []byte(c.body), "Content-Type", c.ct)
		var got struct{ Error string }
		r.JSON(t, &got)
		if r.Status != c.status || !strings.Contains(got.Error, c.says) {
			t.Errorf("%q as %q: %d %s, want %d saying %q", c.body, c.ct, r.Status, r.Body, c.status, c.says)
		}
	}
	if r := e.Do("POST", "/erasures", del.Token, uuidsBody(newUUIDs(60)), "Content-Type", "application/json; charset=utf-8"); r.Status != 200 {
		t.Fatalf("an erasure of 60 uuids: %d %s", r.Status, r.Body)
	}
	r := e.Do("POST", "/erasures", del.Token, uuidsBody(newUUIDs(60)), "Content-Type", "application/json")
	if wait, _ := strconv.Atoi(r.Header.Get("Retry-After")); r.Status != 429 || wait < 1 || wait > 60 {
		t.Fatalf("60 more uuids past a budget of 100 a minute: %d %s, Retry-After %q", r.Status, r.Body, r.Header.Get("Retry-After"))
	}
	n := 0
	e.Daemon.Cat.DB().QueryRow(`SELECT count(*) FROM erasures`).Scan(&n)
	if n != 1 {
		t.Fatalf("%d erasures recorded, want the one answered 200", n)
	}
}

// TestErasureBurst reproduces a burst of large erasures of uuids never
// stored, 4 at a time, while another tenant stores: that tenant's store
// p99 stays within 3 times its p99 without the burst plus 1 s (the goal
// is 3 times; the test's own clients share a loaded 2-core machine with
// the server, and when each erasure held the catalog's writer to its
// end, the p99 was 91 s), and
// the catalog's live pages grow by less than 100 KB per 10,000 uuids
// (they grew by 2.3 MB). The budget is lifted, so that every request of
// the burst runs: it is the worst a server's tenants can do together.
// VCON_ERASE_BURST sets how many requests (default 20).
func TestErasureBurst(t *testing.T) {
	burst := 20
	if v, err := strconv.Atoi(os.Getenv("VCON_ERASE_BURST")); err == nil && v > 0 {
		burst = v
	}
	e := testenv.New(t, testenv.Options{Limits: server.Limits{ErasePerMinute: 1 << 30}})
	eraser := e.NewKey(e.Tenant("acme"), "delete")
	writer := e.NewKey(e.Tenant("other"), "write")
	// store stores n vCons of the other tenant, one after another, or
	// until stop is closed, and returns each store's time.
	store := func(n int, stop chan struct{}) []time.Duration {
		var took []time.Duration
		for i := 0; i < n; i++ {
			select {
			case <-stop:
				return took
			default:
			}
			start := time.Now()
			storeVcon(t, e, "POST", "/vcons", writer.Token, apitest.NewVcon(ids.NewRandom().String(), "other", otherTel), 201)
			took = append(took, time.Since(start))
		}
		return took
	}
	store(20, nil) // warm
	baseAll := store(200, nil)
	base := p99(baseAll)
	// A first erasure warms the erasures' pages.
	if r := e.Do("POST", "/erasures", eraser.Token, uuidsBody(newUUIDs(10)), "Content-Type", "application/json"); r.Status != 200 {
		t.Fatalf("POST /erasures: %d %s", r.Status, r.Body)
	}
	pagesBefore := livePages(t, e)

	stop := make(chan struct{})
	var during []time.Duration
	stored := make(chan struct{})
	go func() { during = store(1<<30, stop); close(stored) }()
	bodies := make(chan []byte, burst)
	for range burst {
		bodies <- uuidsBody(newUUIDs(10000))
	}
	close(bodies)
	start := time.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for b := range bodies {
				r := e.Do("POST", "/erasures", eraser.Token, b, "Content-Type", "application/json")
				var a largeAnswer
				r.JSON(t, &a)
				if r.Status != 200 || a.NotFound != 10000 || len(r.Body) > 4096 {
					t.Errorf("POST /erasures: %d, not_found %d, %d bytes", r.Status, a.NotFound, len(r.Body))
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stop)
	<-stored
	grown := livePages(t, e) - pagesBefore
	got := p99(during)
	t.Logf("store p50 %v during, %v without", p50(during), p50(baseAll))
	t.Logf("%d erasures of 10,000 never-stored uuids, 4 at a time: %v; the other tenant's store p99 %v during them (%d stores), %v without; live pages +%d bytes",
		burst, elapsed.Round(time.Millisecond), got, len(during), base, grown)
	if len(during) < 20 {
		t.Fatalf("only %d stores of the other tenant during the burst", len(during))
	}
	if got > 3*base+time.Second {
		t.Errorf("the other tenant's store p99 %v during the burst, %v without: want at most 3× (+1 s)", got, base)
	}
	if grown >= int64(burst)*100<<10 {
		t.Errorf("the catalog's live pages grew by %d bytes for %d × 10,000 never-stored uuids: want less than 100 KB each", grown, burst)
	}
}

// p99 is the 99th percentile of d, by nearest rank.
func p99(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)*99+99)/100-1]
}

func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// livePages is the catalog's bytes in pages that hold data.
func livePages(t *testing.T, e *testenv.Env) int64 {
	t.Helper()
	var pages, free, size int64
	if err := e.Daemon.Cat.DB().QueryRow(`SELECT page_count, freelist_count, page_size FROM pragma_page_count, pragma_freelist_count, pragma_page_size`).
		Scan(&pages, &free, &size); err != nil {
		t.Fatal(err)
	}
	return (pages - free) * size
}

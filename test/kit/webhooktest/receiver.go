// Package webhooktest is a webhook receiver for tests, over real TLS: it
// checks every delivery's signature by the Standard Webhooks rules
// (written here from the specification, not with the server's code),
// keeps each event once by its webhook-id, and can be told to fail.
package webhooktest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Event is one delivery's body.
type Event struct {
	ID        string `json:"-"` // webhook-id
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      struct {
		Tenant  string `json:"tenant"`
		UUID    string `json:"uuid"`
		Version string `json:"version"`
		Erasure string `json:"erasure"` // erasure.completed only
		// audit.checkpoint only: the log's origin, its size and the
		// signed checkpoint.
		Origin     string `json:"origin"`
		Size       uint64 `json:"size"`
		Checkpoint string `json:"checkpoint"`
	} `json:"data"`
}

// AllowLoopback is the configuration's table that lets webhooks reach a
// receiver on 127.0.0.1, where every test's receiver listens
// (docs/webhooks.md, "Where events may go").
const AllowLoopback = "[webhooks]\nallow = [\"127.0.0.1\"]\n"

// Receiver is a TLS endpoint that takes webhook deliveries.
type Receiver struct {
	Srv        *httptest.Server
	URL        string
	Secret     string // whsec_ and base64
	SecretFile string // mode 0600
	CAFile     string // the receiver's certificate, PEM

	mu       sync.Mutex
	events   []Event         // first deliveries, in arrival order
	seen     map[string]bool // webhook-ids taken
	asked    map[string]int  // requests per webhook-id, failed ones too
	dups     int             // deliveries of an id already taken
	attempts int             // every request
	bad      []string        // why a delivery was refused as unsigned
	raw      strings.Builder // every body received, for greps
	fail     func(n int) int // the status to answer the n-th request (from 1); 0: take it
	// checkpoints are the audit.checkpoint events taken, each once, in
	// arrival order. They come every second while a tenant's log grows,
	// so they are kept apart from the vCon events and every count above,
	// and taken at once: a test of vCon deliveries sees those only.
	checkpoints     []Event
	holdCheckpoints bool // HoldCheckpoints
}

// Start starts a receiver whose files live in dir.
func Start(t testing.TB, dir string) *Receiver {
	key := make([]byte, 32)
	rand.Read(key)
	r := &Receiver{Secret: "whsec_" + base64.StdEncoding.EncodeToString(key), seen: map[string]bool{}, asked: map[string]int{}}
	r.Srv = httptest.NewTLSServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Srv.Close)
	r.URL = r.Srv.URL + "/hooks/vcon"
	r.SecretFile = filepath.Join(dir, "webhook.secret")
	if err := os.WriteFile(r.SecretFile, []byte(r.Secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.CAFile = filepath.Join(dir, "webhook-ca.pem")
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.Srv.Certificate().Raw})
	if err := os.WriteFile(r.CAFile, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	return r
}

// HoldCheckpoints, while on, answers every audit.checkpoint event 503:
// for a test whose count of deliveries is of vCon events only.
func (r *Receiver) HoldCheckpoints(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.holdCheckpoints = on
}

// FailWith sets the status each request answers (by its number, from 1,
// counting every request); 0 takes the delivery. nil takes all.
func (r *Receiver) FailWith(f func(n int) int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = f
}

// Verify checks a delivery as the Standard Webhooks rules say a receiver
// must: the three headers present; the timestamp within five minutes of
// now; the key is the secret without "whsec_", base64-decoded; the signed
// content is id "." timestamp "." body; one of the space-separated
// "v1,<base64>" signatures matches, compared in constant time.
func Verify(secret string, h http.Header, body []byte, now time.Time) string {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return "a header is missing"
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "the timestamp is not an integer"
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return "the timestamp is more than five minutes away"
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return "bad secret"
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + string(body)))
	want := mac.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		v, b64, ok := strings.Cut(s, ",")
		if !ok || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.Strict().DecodeString(b64) // one spelling of each signature
		if err == nil && hmac.Equal(got, want) {
			return ""
		}
	}
	return "no signature matches"
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		w.WriteHeader(400)
		return
	}
	why := Verify(r.Secret, req.Header, body, time.Now())
	var e Event
	if json.Unmarshal(body, &e) == nil && e.Type == "audit.checkpoint" && why == "" {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.holdCheckpoints {
			w.WriteHeader(503)
			return
		}
		if id := req.Header.Get("webhook-id"); !r.seen[id] {
			e.ID, r.seen[id] = id, true
			r.checkpoints = append(r.checkpoints, e)
		}
		w.WriteHeader(204)
		return
	}
	r.mu.Lock()
	r.attempts++
	r.asked[req.Header.Get("webhook-id")]++
	n, fail := r.attempts, r.fail
	r.raw.Write(body)
	r.raw.WriteByte('\n')
	if why != "" {
		r.bad = append(r.bad, why)
	}
	r.mu.Unlock()
	if why != "" {
		w.WriteHeader(401)
		return
	}
	// fail may block (a slow endpoint): it runs without the lock.
	if fail != nil {
		if st := fail(n); st != 0 {
			w.WriteHeader(st)
			return
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	id := req.Header.Get("webhook-id")
	if r.seen[id] {
		r.dups++
		w.WriteHeader(204)
		return
	}
	if err := json.Unmarshal(body, &e); err != nil {
		r.bad = append(r.bad, "body is not JSON")
		w.WriteHeader(400)
		return
	}
	e.ID = id
	r.seen[id] = true
	r.events = append(r.events, e)
	w.WriteHeader(204)
}

// Events returns the events taken, each once, in arrival order.
func (r *Receiver) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// Checkpoints returns the audit.checkpoint events taken, each once, in
// arrival order.
func (r *Receiver) Checkpoints() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.checkpoints...)
}

// Stats returns every request, the deliveries of an id already taken,
// and the reasons deliveries were refused as badly signed.
func (r *Receiver) Stats() (attempts, dups int, bad []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attempts, r.dups, append([]string(nil), r.bad...)
}

// Asked returns how many requests came with each webhook-id, failed
// ones included.
func (r *Receiver) Asked() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.asked))
	for id, n := range r.asked {
		out[id] = n
	}
	return out
}

// Raw is every body received, one a line.
func (r *Receiver) Raw() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.raw.String()
}

// WaitFor waits until n events were taken, failing the test after d.
func (r *Receiver) WaitFor(t testing.TB, n int, d time.Duration) []Event {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ev := r.Events()
		if len(ev) >= n {
			return ev
		}
		if time.Now().After(deadline) {
			a, dups, bad := r.Stats()
			t.Fatalf("the receiver took %d events of %d in %v (requests %d, duplicates %d, refused %v)", len(ev), n, d, a, dups, bad)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

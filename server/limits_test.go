package server

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestClientAddr(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:5555":             "127.0.0.1",
		"[::ffff:10.0.0.1]:1":        "10.0.0.1",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ff::1]:443":   "2001:db8:1:2::/64",
		"not an address":             "not an address",
	} {
		if got := clientAddr(in); got != want {
			t.Errorf("clientAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAuthLimiter: 20 failures within the window block the address for
// the block time, failures spread over longer windows never do, and other
// addresses are not affected.
func TestAuthLimiter(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	lim := newAuthLimiter(Limits{Now: func() time.Time { return now }})
	for i := 1; i < 20; i++ {
		if lim.fail("a") {
			t.Fatalf("blocked after %d failures", i)
		}
	}
	if !lim.fail("a") {
		t.Fatal("20 failures in a minute did not block")
	}
	if lim.blocked("a") != 5*time.Minute || lim.blocked("b") != 0 {
		t.Fatalf("blocked a %v, b %v", lim.blocked("a"), lim.blocked("b"))
	}
	now = now.Add(5*time.Minute + time.Second)
	if lim.blocked("a") != 0 {
		t.Fatal("the block did not end")
	}
	// 19 failures a minute, for an hour: never blocked.
	for m := 0; m < 60; m++ {
		now = now.Add(61 * time.Second)
		for i := 0; i < 19; i++ {
			if lim.fail("slow") {
				t.Fatalf("blocked at minute %d", m)
			}
		}
	}
}

func TestAuthLimiterBounded(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	lim := newAuthLimiter(Limits{Now: func() time.Time { return now }})
	for i := 0; i < 3*maxTracked; i++ {
		lim.fail(strings.Repeat("x", i%7) + string(rune(i)))
	}
	if n := len(lim.addrs); n > maxTracked {
		t.Fatalf("%d addresses tracked, bound %d", n, maxTracked)
	}
}

func TestAmbiguous(t *testing.T) {
	ok := []string{"/health", "/vcons", "/vcons/", "/vcons/0190c1d2-0000-7000-8000-000000000000/versions", "/admin/tenants/x/holds/y"}
	bad := []string{"/vcons/../admin/tenants", "/vcons/./x", "//vcons", "/vcons//x", "/vcons/..", "/vcons/a%2Fb", "/vcons/a%2fb", "/vcons/a%5Cb", "/vcons/%2e%2e/admin"}
	for _, p := range ok {
		r := httptest.NewRequest("GET", "https://x"+p, nil)
		if status, msg := ambiguous(r); status != 0 {
			t.Errorf("%s refused: %s", p, msg)
		}
	}
	for _, p := range bad {
		r := httptest.NewRequest("GET", "https://x"+p, nil)
		if status, _ := ambiguous(r); status != 404 {
			t.Errorf("%s accepted", p)
		}
	}
	r := httptest.NewRequest("GET", "https://x/vcons", nil)
	r.Header.Add("Authorization", "Bearer a")
	r.Header.Add("authorization", "Bearer b")
	if status, _ := ambiguous(r); status != 400 {
		t.Error("two Authorization headers accepted")
	}
}

// TestGuardBlocksFailures runs the guard over a handler that refuses
// every request with 401 but a known token.
func TestGuardBlocksFailures(t *testing.T) {
	s := &Server{Limits: Limits{AuthFailures: 3}}
	h := s.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	codes := []int{}
	for i := 0; i < 5; i++ {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/vcons", nil)
		r.Header.Set("Authorization", "Bearer guess-"+strconv.Itoa(i))
		h.ServeHTTP(w, r)
		codes = append(codes, w.Code)
	}
	if want := []int{401, 401, 401, 429, 429}; !slices.Equal(codes, want) {
		t.Fatalf("codes %v, want %v", codes, want)
	}
	r := httptest.NewRequest("GET", "/vcons", nil)
	r.RemoteAddr = "192.0.2.9:4444"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 401 {
		t.Fatalf("another address got %d", w.Code)
	}
}

// TestGuardCountsGuessesOnly: requests that send no Authorization header
// (a probe, the server's own webhook deliveries sent to itself) are
// answered 401 but guess no key: however many, they never get their
// address blocked.
func TestGuardCountsGuessesOnly(t *testing.T) {
	s := &Server{Limits: Limits{AuthFailures: 3}}
	h := s.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	for i := 0; i < 50; i++ {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/hooks", nil)
		r.Header.Set("webhook-id", "msg_"+strconv.Itoa(i))
		h.ServeHTTP(w, r)
		if w.Code != 401 {
			t.Fatalf("request %d without a key: %d, want 401", i, w.Code)
		}
	}
}

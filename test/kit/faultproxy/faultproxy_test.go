package faultproxy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/s3sig"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/objstore/storetest"
	"github.com/vcon-server/vcon-server/test/kit/faultproxy"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
)

// backend is a TLS server that answers every request with a 64 KiB body
// and counts what reached it.
type backend struct {
	*httptest.Server
	hits atomic.Int64
	body []byte
}

func newBackend(t *testing.T) *backend {
	b := &backend{body: bytes.Repeat([]byte("0123456789abcdef"), 4096)}
	b.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		b.hits.Add(1)
		w.Header().Set("X-Host", r.Host)
		w.Header().Set("Content-Length", strconv.Itoa(len(b.body)))
		w.Write(b.body)
	}))
	t.Cleanup(b.Close)
	return b
}

func start(t *testing.T, b *backend, rules ...faultproxy.Rule) (*faultproxy.Proxy, *http.Client) {
	t.Helper()
	p, err := faultproxy.Start(b.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Certificate().Raw}), faultproxy.Options{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if err := p.SetRules(rules...); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CAPEM)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
	return p, c
}

func get(c *http.Client, url, method string) (int, []byte, error) {
	req, _ := http.NewRequest(method, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func TestForwardsUntouched(t *testing.T) {
	b := newBackend(t)
	p, c := start(t, b)
	status, body, err := get(c, p.URL+"/bucket/key", "GET")
	if err != nil || status != 200 || !bytes.Equal(body, b.body) {
		t.Fatalf("status %d, %d bytes, %v", status, len(body), err)
	}
	if s := p.Stats(); s.Requests != 1 || s.Forwarded != 1 || s.Total() != 0 {
		t.Fatalf("stats %s", s)
	}
}

func TestHostIsForwarded(t *testing.T) {
	b := newBackend(t)
	p, c := start(t, b)
	resp, err := c.Get(p.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got, want := resp.Header.Get("X-Host"), strings.TrimPrefix(p.URL, "https://"); got != want {
		t.Fatalf("the server saw Host %q, want the proxy's %q (what the client signed)", got, want)
	}
}

func TestEachFault(t *testing.T) {
	for _, tc := range []struct {
		fault     faultproxy.Fault
		status    int
		reached   bool // the request reached the server
		wantError bool // the client sees a transport or body error
	}{
		{faultproxy.Status500, 500, false, false},
		{faultproxy.Status503, 503, false, false},
		{faultproxy.Reset, 0, false, true},
		{faultproxy.Delay, 200, true, false},
		{faultproxy.CutBody, 200, true, true},
		{faultproxy.DropResponse, 0, true, true},
	} {
		t.Run(string(tc.fault), func(t *testing.T) {
			b := newBackend(t)
			p, c := start(t, b, faultproxy.Rule{Fault: tc.fault, Delay: 200 * time.Millisecond})
			began := time.Now()
			status, body, err := get(c, p.URL+"/bucket/key", "GET")
			if (err != nil) != tc.wantError || status != tc.status {
				t.Fatalf("status %d, error %v; want %d, error %v", status, err, tc.status, tc.wantError)
			}
			if tc.fault == faultproxy.Reset && !errors.Is(err, syscall.ECONNRESET) && !strings.Contains(err.Error(), "EOF") {
				t.Errorf("reset: %v, want a connection reset", err)
			}
			if tc.fault == faultproxy.CutBody && (len(body) != len(b.body)/2 || !bytes.Equal(body, b.body[:len(body)])) {
				t.Errorf("cut body: %d bytes, want the first %d", len(body), len(b.body)/2)
			}
			if tc.fault == faultproxy.Delay && time.Since(began) < 200*time.Millisecond {
				t.Errorf("delay: answered after %v", time.Since(began))
			}
			if got := b.hits.Load() == 1; got != tc.reached {
				t.Errorf("reached the server: %v, want %v", got, tc.reached)
			}
			if s := p.Stats(); s.Faults[tc.fault] != 1 {
				t.Errorf("stats %s", s)
			}
		})
	}
}

func TestRuleSelection(t *testing.T) {
	b := newBackend(t)
	p, c := start(t, b,
		faultproxy.Rule{Method: "^PUT$", Path: "^/bucket/objects/", Fault: faultproxy.Status503, Every: 2},
		faultproxy.Rule{Method: "^GET$", Path: "list-type=2", Fault: faultproxy.Status500, Count: 1},
	)
	var got []int
	for i := 0; i < 4; i++ {
		s, _, _ := get(c, p.URL+"/bucket/objects/k", "PUT")
		got = append(got, s)
	}
	s1, _, _ := get(c, p.URL+"/bucket?list-type=2", "GET")
	s2, _, _ := get(c, p.URL+"/bucket?list-type=2", "GET")
	s3, _, _ := get(c, p.URL+"/bucket/other", "PUT")
	if want := []int{200, 503, 200, 503}; !equal(got, want) || s1 != 500 || s2 != 200 || s3 != 200 {
		t.Fatalf("every-2nd PUT %v (want %v), counted list %d %d, other path %d", got, want, s1, s2, s3)
	}
	if err := p.SetRules(faultproxy.Rule{Path: "("}); err == nil {
		t.Fatal("a bad regexp was accepted")
	}
	p.Clear()
	if s, _, _ := get(c, p.URL+"/bucket/objects/k", "PUT"); s != 200 {
		t.Fatalf("after Clear: %d", s)
	}
}

func TestProbabilityIsSeeded(t *testing.T) {
	run := func() []int {
		b := newBackend(t)
		p, c := start(t, b, faultproxy.Rule{Fault: faultproxy.Status503, Prob: 0.3})
		var out []int
		for i := 0; i < 40; i++ {
			s, _, _ := get(c, p.URL+"/k", "GET")
			out = append(out, s)
		}
		return out
	}
	a, b := run(), run()
	n := 0
	for _, s := range a {
		if s == 503 {
			n++
		}
	}
	if !equal(a, b) || n == 0 || n == 40 {
		t.Fatalf("seeded runs differ or never/always fire: %v %v", a, b)
	}
}

func TestLoopbackOnly(t *testing.T) {
	if _, err := faultproxy.Start("https://127.0.0.1:1", nil, faultproxy.Options{Listen: "0.0.0.0:0"}); err == nil {
		t.Fatal("listening beyond loopback was accepted")
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// throughProxy starts versitygw and a fault proxy in front of it, and
// returns a client of the proxy with quick retries.
func throughProxy(t *testing.T, retries int) (*s3test.Server, *faultproxy.Proxy, *s3sig.Client) {
	srv := s3test.Start(t, "versitygw")
	p, err := faultproxy.Start(srv.Endpoint, srv.CAPEM, faultproxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := s3sig.New(s3sig.Config{
		Endpoint:    p.URL,
		Region:      srv.Region,
		Credentials: s3sig.Credentials{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey},
		PathStyle:   true,
		CAPEM:       p.CAPEM,
		MaxRetries:  retries,
		RetryBase:   time.Millisecond,
		RetryMax:    20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv, p, c
}

// absorbable are faults a retrying client turns into successes: none of
// them hands the caller an answer it has started to read.
func absorbable(rate float64) []faultproxy.Rule {
	return []faultproxy.Rule{
		{Fault: faultproxy.Status503, Prob: rate},
		{Fault: faultproxy.Status500, Prob: rate / 2},
		{Fault: faultproxy.Reset, Prob: rate},
		{Fault: faultproxy.DropResponse, Prob: rate},
		{Fault: faultproxy.Delay, Prob: rate / 2, Delay: 20 * time.Millisecond},
	}
}

// TestConformanceThroughFaults runs the object store's conformance suite
// on versitygw through the proxy, with a fault on about one request in
// six: the client's retries (rewinding each body) must absorb every one,
// and a create-only PUT whose first answer was dropped must find that the
// object it meets is its own.
func TestConformanceThroughFaults(t *testing.T) {
	srv, p, c := throughProxy(t, 10)
	if err := p.SetRules(absorbable(0.05)...); err != nil {
		t.Fatal(err)
	}
	t.Logf("fault seed %d", p.Seed())
	storetest.Run(t, func(t *testing.T) objstore.Store {
		return objstore.NewS3(c, srv.NewBucket(t, false), "faults/", t.TempDir())
	})
	st := p.Stats()
	t.Logf("through the proxy: %s", st)
	if st.Total() < 20 {
		t.Errorf("only %d faults injected: the run proved little", st.Total())
	}
}

// TestCutBodyFailsCleanly: a body cut short after the answer's headers
// cannot be retried by the client; the reader must end in an error, never
// in a short read that looks like the whole object.
func TestCutBodyFailsCleanly(t *testing.T) {
	srv, p, c := throughProxy(t, 4)
	s := objstore.NewS3(c, srv.NewBucket(t, false), "", t.TempDir())
	data := bytes.Repeat([]byte("sealed"), 50000)
	ctx := context.Background()
	if err := objstore.Put(ctx, s, "objects/a", bytes.NewReader(data), true); err != nil {
		t.Fatal(err)
	}
	p.SetRules(faultproxy.Rule{Method: "GET", Fault: faultproxy.CutBody})
	for _, read := range []func() (io.ReadCloser, error){
		func() (io.ReadCloser, error) { return s.Get(ctx, "objects/a") },
		func() (io.ReadCloser, error) { return s.GetRange(ctx, "objects/a", 1000, 200000) },
	} {
		rc, err := read()
		if err != nil {
			continue // refused before any byte: clean too
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err == nil {
			t.Fatalf("a cut body read as %d bytes with no error", len(got))
		}
	}
	p.Clear()
	rc, err := s.Get(ctx, "objects/a")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, data) {
		t.Fatal("the object changed")
	}
}

// TestPersistentFaultsFailCleanly: when every PUT fails, Put returns an
// error after the retries, and nothing is left under the key.
func TestPersistentFaultsFailCleanly(t *testing.T) {
	srv, p, c := throughProxy(t, 3)
	s := objstore.NewS3(c, srv.NewBucket(t, false), "", t.TempDir())
	ctx := context.Background()
	for _, f := range []faultproxy.Fault{faultproxy.Status503, faultproxy.Reset, faultproxy.Status500} {
		p.SetRules(faultproxy.Rule{Method: "PUT", Fault: f})
		if err := objstore.Put(ctx, s, "objects/"+string(f), strings.NewReader("x"), true); err == nil {
			t.Fatalf("%s on every PUT: the put succeeded", f)
		}
		p.Clear()
		if _, err := s.Stat(ctx, "objects/"+string(f)); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("%s: after a failed put, stat says %v", f, err)
		}
	}
}

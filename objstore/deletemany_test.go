package objstore_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/metrics"
	"github.com/vcon-server/vcon-server/internal/s3sig"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/test/kit/promtext"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
)

// putMany writes the keys, 16 at once.
func putMany(t *testing.T, s objstore.Store, keys []string) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	var failed atomic.Int64
	for _, k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := put(t, s, k, "v", false); err != nil {
				failed.Add(1)
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.FailNow()
	}
}

func listAll(t *testing.T, s objstore.Store) []string {
	t.Helper()
	var keys []string
	if err := s.List(t.Context(), "", func(i objstore.Info) error {
		keys = append(keys, i.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	return keys
}

// manyKeys names n keys of objects/t/, and a few odd ones.
func manyKeys(n int) []string {
	keys := []string{"objects/t/a b", "objects/t/a&b<c>", "objects/t/ü/日本語"}
	for i := len(keys); i < n; i++ {
		keys = append(keys, fmt.Sprintf("objects/t/%05d", i))
	}
	return keys
}

// TestS3DeleteMany deletes more keys than one call takes, some never
// written, on each real server, through the metered store as the server
// runs it.
func TestS3DeleteMany(t *testing.T) {
	s3test.ForEach(t, func(t *testing.T, srv *s3test.Server) {
		s := objstore.NewS3(srv.Client(t), srv.NewBucket(t, false), "deploy/", t.TempDir())
		keys := manyKeys(2500)
		putMany(t, s, keys[:2200])
		putMany(t, s, []string{"objects/keep"})
		reg := metrics.NewRegistry()
		m := objstore.NewMetered(s, reg)
		failed, err := objstore.DeleteMany(t.Context(), m, keys)
		if err != nil || len(failed) != 0 {
			t.Fatalf("delete many: %d failed, %v", len(failed), err)
		}
		if left := listAll(t, s); len(left) != 1 || left[0] != "objects/keep" {
			t.Errorf("left: %d keys, want only objects/keep", len(left))
		}
		if s.BatchDeletesRefused() {
			t.Error("the server's DeleteObjects was taken for a refusal")
		}
		var b strings.Builder
		reg.Write(&b)
		fams, err := promtext.Parse(strings.NewReader(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := fams.Value("vcon_objstore_requests_total", "call", "delete_many", "outcome", "ok"); n != 1 {
			t.Errorf("delete_many counted %v times, want 1", n)
		}
		if n, _ := fams.Value("vcon_objstore_requests_total", "call", "delete", "outcome", "ok"); n != 0 {
			t.Errorf("%v single deletes counted, want none", n)
		}
	})
}

// refusingProxy passes every request to a real server but answers
// POST ?delete as a server without DeleteObjects does, and counts.
type refusingProxy struct {
	proxy          *httputil.ReverseProxy
	posts, deletes atomic.Int64
}

func (p *refusingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Query().Has("delete") {
		p.posts.Add(1)
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNotImplemented)
		io.WriteString(w, `<Error><Code>NotImplemented</Code><Message>A header you provided implies functionality that is not implemented</Message></Error>`)
		return
	}
	if r.Method == http.MethodDelete {
		p.deletes.Add(1)
	}
	p.proxy.ServeHTTP(w, r)
}

// clientVia returns a client of srv's keys that reaches it through h,
// served over TLS.
func clientVia(t *testing.T, srv *s3test.Server, h http.Handler) *s3sig.Client {
	front := httptest.NewTLSServer(h)
	t.Cleanup(front.Close)
	c, err := s3sig.New(s3sig.Config{
		Endpoint:    front.URL,
		Credentials: s3sig.Credentials{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey},
		PathStyle:   true,
		CAPEM:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: front.Certificate().Raw}),
		RetryBase:   time.Millisecond,
		RetryMax:    10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestS3DeleteManyFallback: a server that refuses DeleteObjects gets
// single DELETEs, and is asked for a batch only once in the process.
func TestS3DeleteManyFallback(t *testing.T) {
	srv := s3test.Start(t, "versitygw")
	target, _ := url.Parse(srv.Endpoint)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(srv.CAPEM)
	rp := &refusingProxy{proxy: &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host // the client signed the proxy's host
		},
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}}
	s := objstore.NewS3(clientVia(t, srv, rp), srv.NewBucket(t, false), "", t.TempDir())
	keys := manyKeys(1500)
	putMany(t, s, keys[:1200])
	failed, err := objstore.DeleteMany(t.Context(), s, keys)
	if err != nil || len(failed) != 0 {
		t.Fatalf("delete many: %d failed, %v", len(failed), err)
	}
	// Two calls of 1,000 and 500 may run at once: each is refused once.
	if n := rp.posts.Load(); n < 1 || n > 2 {
		t.Errorf("%d DeleteObjects calls, want 1 or 2", n)
	}
	if n := rp.deletes.Load(); n != int64(len(keys)) {
		t.Errorf("%d single deletes, want %d", n, len(keys))
	}
	if !s.BatchDeletesRefused() {
		t.Error("the refusal was not remembered")
	}
	if left := listAll(t, s); len(left) != 0 {
		t.Errorf("%d keys left", len(left))
	}

	posts := rp.posts.Load()
	putMany(t, s, keys[:10])
	if failed, err := objstore.DeleteMany(t.Context(), s, keys[:10]); err != nil || len(failed) != 0 {
		t.Fatalf("second delete many: %v %v", failed, err)
	}
	if rp.posts.Load() != posts {
		t.Error("the server was asked for DeleteObjects again after it refused")
	}
	if left := listAll(t, s); len(left) != 0 {
		t.Errorf("%d keys left after the second call", len(left))
	}
}

// fakeBucket keeps keys in memory; it answers DeleteObjects with an error
// for every key holding "flaky" (deleting the others), and single DELETEs,
// refusing those of keys holding "stuck".
type fakeBucket struct {
	mu      sync.Mutex
	keys    map[string]bool
	singles []string
}

func (f *fakeBucket) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := strings.TrimPrefix(r.URL.Path, "/b/")
	switch {
	case r.Method == http.MethodPost && r.URL.Query().Has("delete"):
		var doc struct {
			Objects []struct {
				Key string `xml:"Key"`
			} `xml:"Object"`
		}
		body, _ := io.ReadAll(r.Body)
		xml.Unmarshal(body, &doc)
		var b strings.Builder
		b.WriteString(`<DeleteResult>`)
		for _, o := range doc.Objects {
			if strings.Contains(o.Key, "flaky") || strings.Contains(o.Key, "stuck") {
				fmt.Fprintf(&b, `<Error><Key>%s</Key><Code>InternalError</Code><Message>try again</Message></Error>`, o.Key)
				continue
			}
			delete(f.keys, o.Key)
		}
		b.WriteString(`</DeleteResult>`)
		io.WriteString(w, b.String())
	case r.Method == http.MethodDelete:
		f.singles = append(f.singles, key)
		if strings.Contains(key, "stuck") {
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
			return
		}
		delete(f.keys, key)
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusBadRequest)
	}
}

// TestS3DeleteManyKeyErrors: a key the batch did not delete is tried once
// more on its own; one that still fails is returned, and the error names
// no key.
func TestS3DeleteManyKeyErrors(t *testing.T) {
	f := &fakeBucket{keys: map[string]bool{}}
	keys := []string{"objects/t-secret/a", "objects/t-secret/flaky-1", "objects/t-secret/b", "objects/t-secret/flaky-2", "objects/t-secret/stuck"}
	for _, k := range keys {
		f.keys["p/"+k] = true
	}
	srv := httptest.NewTLSServer(f)
	t.Cleanup(srv.Close)
	c, err := s3sig.New(s3sig.Config{
		Endpoint:    srv.URL,
		Credentials: s3sig.Credentials{AccessKeyID: "a", SecretAccessKey: "b"},
		PathStyle:   true,
		CAPEM:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
		RetryBase:   time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := objstore.NewS3(c, "b", "p/", t.TempDir())
	failed, err := objstore.DeleteMany(t.Context(), s, keys)
	if len(failed) != 1 || failed[0] != "objects/t-secret/stuck" || !errors.Is(err, s3sig.ErrAccessDenied) {
		t.Fatalf("failed %q, %v; want the stuck key, access denied", failed, err)
	}
	if strings.Contains(err.Error(), "t-secret") {
		t.Errorf("the error names a key: %v", err)
	}
	sort.Strings(f.singles)
	if want := "[p/objects/t-secret/flaky-1 p/objects/t-secret/flaky-2 p/objects/t-secret/stuck]"; fmt.Sprint(f.singles) != want {
		t.Errorf("single deletes %v, want %s", f.singles, want)
	}
	if len(f.keys) != 1 || !f.keys["p/objects/t-secret/stuck"] {
		t.Errorf("left %v, want only the stuck key", f.keys)
	}
	if s.BatchDeletesRefused() {
		t.Error("per-key errors were taken for a refusal")
	}
}

// TestDirDeleteMany: a store without batches deletes key by key.
func TestDirDeleteMany(t *testing.T) {
	d, err := objstore.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	keys := manyKeys(40)
	putMany(t, d, keys[:30])
	putMany(t, d, []string{"objects/keep"})
	if failed, err := objstore.DeleteMany(t.Context(), d, keys); err != nil || len(failed) != 0 {
		t.Fatalf("delete many: %v %v", failed, err)
	}
	if left := listAll(t, d); len(left) != 1 || left[0] != "objects/keep" {
		t.Errorf("left %q", left)
	}
}

// BenchmarkS3DeleteMany deletes 2,000 objects of versitygw per op, with
// DeleteObjects and then, on the same server, with single DELETEs (16 at
// once, as a store without batches does); it reports keys/s of each and
// their ratio.
//
//	go test ./objstore -run '^$' -bench S3DeleteMany -benchtime 3x
func BenchmarkS3DeleteMany(b *testing.B) {
	srv := s3test.Start(b, "versitygw")
	c := srv.Client(b)
	keys := manyKeys(2000)
	rate := map[string]float64{}
	for _, mode := range []string{"batch", "single"} {
		var took time.Duration
		for i := 0; i < b.N; i++ {
			s := objstore.NewS3(c, srv.NewBucket(b, false), "", b.TempDir())
			var store objstore.Store = s
			if mode == "single" {
				store = struct{ objstore.Store }{s} // hides DeleteMany
			}
			putManyB(b, s, keys)
			start := time.Now()
			if failed, err := objstore.DeleteMany(context.Background(), store, keys); err != nil || len(failed) > 0 {
				b.Fatalf("%s: %d failed: %v", mode, len(failed), err)
			}
			took += time.Since(start)
		}
		rate[mode] = float64(len(keys)*b.N) / took.Seconds()
		b.ReportMetric(rate[mode], mode+"-keys/s")
	}
	b.ReportMetric(rate["batch"]/rate["single"], "batch/single")
}

func putManyB(b *testing.B, s objstore.Store, keys []string) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := objstore.Put(context.Background(), s, k, strings.NewReader("v"), false); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
}

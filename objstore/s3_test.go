package objstore_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/s3sig"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/objstore/storetest"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
)

// TestS3Conformance runs the store's conformance suite on each real S3
// server, a fresh bucket per store, with and without a key prefix.
func TestS3Conformance(t *testing.T) {
	s3test.ForEach(t, func(t *testing.T, srv *s3test.Server) {
		c := srv.Client(t)
		for _, prefix := range []string{"", "deploy/one/"} {
			name := "prefix=" + prefix
			if prefix == "" {
				name = "noprefix"
			}
			t.Run(name, func(t *testing.T) {
				storetest.Run(t, func(t *testing.T) objstore.Store {
					return objstore.NewS3(c, srv.NewBucket(t, false), prefix, t.TempDir())
				})
			})
		}
	})
}

func put(t testing.TB, s objstore.Store, key, data string, createOnly bool) error {
	t.Helper()
	return objstore.Put(context.Background(), s, key, strings.NewReader(data), createOnly)
}

func read(t testing.TB, s objstore.Store, key string) string {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestS3Specifics(t *testing.T) {
	s3test.ForEach(t, func(t *testing.T, srv *s3test.Server) {
		c := srv.Client(t)
		ctx := t.Context()

		t.Run("CreateOnlyRefused", func(t *testing.T) {
			spool := t.TempDir()
			s := objstore.NewS3(c, srv.NewBucket(t, false), "p/", spool)
			if err := put(t, s, "marker", "catalog 1", true); err != nil {
				t.Fatal(err)
			}
			err := put(t, s, "marker", "catalog 2", true)
			if !errors.Is(err, objstore.ErrExists) {
				t.Fatalf("second create-only put: %v, want ErrExists", err)
			}
			if got := read(t, s, "marker"); got != "catalog 1" {
				t.Errorf("marker now %q", got)
			}
			// A spool file has no name even while its upload is open, so a
			// kill at any point leaves nothing (an export's may hold clear
			// columns); Commit and Abort free it.
			u, err := s.Upload(ctx, "aborted", false)
			if err != nil {
				t.Fatal(err)
			}
			u.Write([]byte("clear columns"))
			if left, _ := os.ReadDir(spool); len(left) != 0 {
				t.Errorf("an open upload's spool file has a name: %v", left)
			}
			u.Abort()
			if left, _ := os.ReadDir(spool); len(left) != 0 {
				t.Errorf("spool files left: %d", len(left))
			}
		})

		t.Run("OddKeys", func(t *testing.T) {
			bucket := srv.NewBucket(t, false)
			s := objstore.NewS3(c, bucket, "x=y +z/", t.TempDir())
			keys := []string{"tenants/a b/c", "tenants/a+b/c=d", "tenants/ü/日本語", "tenants/%2F/%41", "tenants/a&b;c,d"}
			for _, k := range keys {
				if err := put(t, s, k, k, false); err != nil {
					t.Fatalf("put: %v", err)
				}
			}
			var listed []string
			if err := s.List(ctx, "tenants/", func(i objstore.Info) error {
				listed = append(listed, i.Key)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(listed) != len(keys) {
				t.Errorf("listed %q", listed)
			}
			for _, k := range keys {
				if got := read(t, s, k); got != k {
					t.Errorf("read %q back as %q", k, got)
				}
			}
			if got := s.String(); got != `bucket "`+bucket+`" prefix "x=y +z/"` {
				t.Errorf("String() = %s", got)
			}
		})

		t.Run("ListOverOneThousand", func(t *testing.T) {
			s := objstore.NewS3(c, srv.NewBucket(t, false), "pre/", t.TempDir())
			const n = 1100
			var wg sync.WaitGroup
			sem := make(chan struct{}, 16)
			var failed atomic.Int64
			for i := range n {
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					if err := put(t, s, fmt.Sprintf("objects/t/%04d", i), "v", false); err != nil {
						failed.Add(1)
						t.Error(err)
					}
				})
			}
			wg.Wait()
			if failed.Load() > 0 {
				t.FailNow()
			}
			i := 0
			err := s.List(ctx, "objects/", func(info objstore.Info) error {
				if want := fmt.Sprintf("objects/t/%04d", i); info.Key != want || info.Size != 1 {
					return fmt.Errorf("entry %d: %+v, want %s", i, info, want)
				}
				i++
				return nil
			})
			if err != nil || i != n {
				t.Fatalf("listed %d of %d: %v", i, n, err)
			}
		})

		t.Run("BucketChecks", func(t *testing.T) {
			for _, tc := range []struct {
				name       string
				bucket     string
				versioning string
				lock       bool
			}{
				{"plain", srv.NewBucket(t, false), "", false},
				{"versioned", srv.NewBucket(t, true), s3sig.VersioningEnabled, false},
				{"locked", srv.NewLockedBucket(t), s3sig.VersioningEnabled, true},
			} {
				s := objstore.NewS3(c, tc.bucket, "", t.TempDir())
				// Object Lock is read first: the start check reports it
				// before versioning.
				lock, err := s.ObjectLock(ctx)
				if err != nil || lock != tc.lock {
					t.Errorf("%s: object lock %v %v, want %v", tc.name, lock, err, tc.lock)
				}
				v, err := s.Versioning(ctx)
				if err != nil || v != tc.versioning {
					t.Errorf("%s: versioning %q %v, want %q", tc.name, v, err, tc.versioning)
				}
			}
		})

		t.Run("MissingBucketIsNotMissingKey", func(t *testing.T) {
			s := objstore.NewS3(c, "vcon-test-no-such-bucket", "", t.TempDir())
			if _, err := s.Get(ctx, "objects/x"); err == nil || errors.Is(err, objstore.ErrNotFound) {
				t.Errorf("get in a missing bucket: %v, want an error other than ErrNotFound", err)
			}
			if err := s.List(ctx, "", func(objstore.Info) error { return nil }); err == nil {
				t.Error("list of a missing bucket succeeded")
			}
		})
	})
}

// steadyTransport is the fault proxy's own leg to the bucket: it sends a
// request again when the connection fails, so the client sees only the
// faults the proxy means. The bucket answers a create-only PUT of a large
// body with 412 before reading it and closes the connection; the proxy,
// still sending, would otherwise answer 502, a fault of its own.
type steadyTransport struct{ http.RoundTripper }

func (s steadyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		resp, err := s.RoundTripper.RoundTrip(r)
		if err == nil || r.GetBody == nil || attempt == 10 || r.Context().Err() != nil {
			return resp, err
		}
		body, _ := r.GetBody()
		r = r.Clone(r.Context())
		r.Body = body
	}
}

// faultProxy sits between the client and a real server. For a path that
// contains one of its fault words it answers as told before (or instead
// of) passing the request on, and records each request body it saw.
type faultProxy struct {
	mu     sync.Mutex
	bodies map[string][][]byte // by fault word
	proxy  *httputil.ReverseProxy
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	for _, word := range []string{"slowdown", "denied", "reset", "conflict", "lost"} {
		if !strings.Contains(r.URL.Path, word) {
			continue
		}
		p.mu.Lock()
		p.bodies[word] = append(p.bodies[word], body)
		n := len(p.bodies[word])
		p.mu.Unlock()
		switch {
		case word == "slowdown" && n <= 2:
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><RequestId>1234</RequestId></Error>`)
			return
		case word == "conflict" && n == 1:
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `<Error><Code>ConditionalRequestConflict</Code><Message>A conflicting conditional operation is currently in progress against this resource.</Message></Error>`)
			return
		case word == "reset" && n == 1:
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		case word == "lost" && n == 1:
			// The server stores the object, but its answer is lost.
			p.proxy.ServeHTTP(httptest.NewRecorder(), r)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		case word == "denied":
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `<Error><Code>AccessDenied</Code><Message>Access Denied</Message><RequestId>r1</RequestId></Error>`)
			return
		}
	}
	p.proxy.ServeHTTP(w, r)
}

// TestS3Retries proves that the client retries 503, a conflicting
// conditional write and a dropped connection, sending the whole body again
// each time, from memory or from the spool file, and never retries a
// 403. "lost" is a create-only put whose first attempt stored the object
// but lost the answer: the retry's 412 is the upload's own object, not
// ErrExists.
func TestS3Retries(t *testing.T) {
	srv := s3test.Start(t, "versitygw")
	target, _ := url.Parse(srv.Endpoint)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(srv.CAPEM)
	fp := &faultProxy{bodies: map[string][][]byte{}}
	fp.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// The client signed the proxy's host; the server checks the
			// signature against the Host it receives.
			pr.Out.Host = pr.In.Host
		},
		Transport: steadyTransport{&http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}},
	}
	c := clientVia(t, srv, fp)
	spool := t.TempDir()
	s := objstore.NewS3(c, srv.NewBucket(t, false), "", spool)
	payload := strings.Repeat("sealed bytes ", 5000)

	// A small upload is sent from memory; one above the memory bound from
	// its sealed spool file, which each retry rewinds.
	for _, size := range []string{"memory", "spool"} {
		body := payload
		if size == "spool" {
			body = strings.Repeat("sealed bytes ", 250000)
		}
		fp.mu.Lock()
		fp.bodies = map[string][][]byte{}
		fp.mu.Unlock()
		for _, word := range []string{"slowdown", "conflict", "reset", "lost"} {
			t.Run(size+"/"+word, func(t *testing.T) {
				key := "objects/" + size + "/" + word
				if err := put(t, s, key, body, true); err != nil {
					t.Fatalf("put through %s: %v", word, err)
				}
				if got := read(t, s, key); got != body {
					t.Fatalf("stored %d bytes, want %d", len(got), len(body))
				}
				fp.mu.Lock()
				bodies := fp.bodies[word]
				fp.mu.Unlock()
				// The PUT attempts, then the GET above (no body).
				puts := 0
				for _, b := range bodies {
					if len(b) == 0 {
						continue
					}
					puts++
					if string(b) != body {
						t.Errorf("attempt %d sent %d bytes, want the whole %d: the body was not rewound", puts, len(b), len(body))
					}
				}
				want := map[string]int{"slowdown": 3, "conflict": 2, "lost": 2}[word]
				if word == "reset" {
					// The dropped attempt's body may be cut short; the
					// retry is the second request the proxy saw.
					puts = len(bodies) - 1
					want = 2
				}
				if puts != want {
					t.Errorf("%d PUT attempts, want %d", puts, want)
				}
			})
		}
	}

	t.Run("denied", func(t *testing.T) {
		err := put(t, s, "objects/denied", payload, false)
		if !errors.Is(err, s3sig.ErrAccessDenied) {
			t.Fatalf("put: %v, want access denied", err)
		}
		if n := len(fp.bodies["denied"]); n != 1 {
			t.Errorf("a 403 was sent %d times, want once", n)
		}
		if strings.Contains(err.Error(), "objects/denied") {
			t.Errorf("the error names the key: %v", err)
		}
		if want := "s3: put object: 403 AccessDenied: Access Denied (request id r1)"; err.Error() != want {
			t.Errorf("error text %q, want %q", err, want)
		}
	})

	t.Run("gives up", func(t *testing.T) {
		// A server that stays busy: each attempt answers 503, and the
		// error says what it last answered.
		busy := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><RequestId>1234</RequestId></Error>`)
		}))
		defer busy.Close()
		bc, err := s3sig.New(s3sig.Config{
			Endpoint:    busy.URL,
			Credentials: s3sig.Credentials{AccessKeyID: "a", SecretAccessKey: "b"},
			PathStyle:   true,
			CAPEM:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: busy.Certificate().Raw}),
			MaxRetries:  2,
			RetryBase:   time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		err = put(t, objstore.NewS3(bc, "b", "", spool), "objects/k", "x", false)
		var se *s3sig.Error
		if !errors.As(err, &se) || se.Attempts != 3 || err.Error() != "s3: put object: 503 SlowDown: Please reduce your request rate. (request id 1234)" {
			t.Errorf("busy server: %v (%+v)", err, se)
		}
	})

	if left, _ := os.ReadDir(spool); len(left) != 0 {
		t.Errorf("spool files left: %d", len(left))
	}
}

// TestS3Unreachable checks that a dead endpoint fails with a plain error
// that names no key, after the retries.
func TestS3Unreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c, err := s3sig.New(s3sig.Config{
		Endpoint:    "https://" + addr,
		Credentials: s3sig.Credentials{AccessKeyID: "a", SecretAccessKey: "b"},
		PathStyle:   true,
		MaxRetries:  1,
		RetryBase:   time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := objstore.NewS3(c, "b", "", t.TempDir())
	_, err = s.Stat(t.Context(), "tenants/secret-tenant/objects/v")
	if err == nil || strings.Contains(err.Error(), "secret-tenant") {
		t.Fatalf("stat on a dead endpoint: %v", err)
	}
}

// BenchmarkS3PutGet measures raw PutObject and GetObject of 4 KiB through
// the client against versitygw, 16 goroutines at once: the baseline that
// the product's own storage benchmarks compare against. One op is one PUT
// and one GET of a new key.
func BenchmarkS3PutGet(b *testing.B) {
	srv := s3test.Start(b, "versitygw")
	c := srv.Client(b)
	bucket := srv.NewBucket(b, false)
	payload := bytes.Repeat([]byte("x"), 4096)
	ctx := context.Background()
	var seq atomic.Int64
	b.SetBytes(2 * int64(len(payload)))
	// RunParallel starts parallelism × GOMAXPROCS goroutines.
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((16 + procs - 1) / procs)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := fmt.Sprintf("bench/%d", seq.Add(1))
			if _, err := c.PutObject(ctx, bucket, key, bytes.NewReader(payload), int64(len(payload)), s3sig.PutOptions{}); err != nil {
				b.Error(err)
				return
			}
			r, err := c.GetObject(ctx, bucket, key, s3sig.GetOptions{})
			if err != nil {
				b.Error(err)
				return
			}
			n, _ := io.Copy(io.Discard, r.Body)
			r.Body.Close()
			if n != int64(len(payload)) {
				b.Errorf("read %d bytes", n)
				return
			}
		}
	})
}

package tlsproxy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/s3sig"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/tlsproxy"
)

// A signed PUT through the proxy verifies at the S3 server (Host kept),
// and the object comes back the same through the proxy and without it.
func TestRelaysSignedRequests(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t, "versitygw")
	px := tlsproxy.Start(t, srv.Endpoint, srv.CAPEM)
	c, err := s3sig.New(s3sig.Config{
		Endpoint:    px.URL,
		Region:      srv.Region,
		Credentials: s3sig.Credentials{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey},
		PathStyle:   true,
		CAPEM:       px.CAPEM,
		MaxRetries:  -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	bucket := srv.NewBucket(t, false)
	body := bytes.Repeat([]byte("sealed "), 600)
	if _, err := c.PutObject(ctx, bucket, "k", bytes.NewReader(body), int64(len(body)), s3sig.PutOptions{IfNoneMatch: true}); err != nil {
		t.Fatalf("PUT through the proxy: %v", err)
	}
	for name, client := range map[string]*s3sig.Client{"proxied": c, "raw": srv.Client(t)} {
		r, err := client.GetObject(ctx, bucket, "k", s3sig.GetOptions{})
		if err != nil {
			t.Fatalf("%s GET: %v", name, err)
		}
		got, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("%s GET: %d bytes (%v), want the %d put", name, len(got), err, len(body))
		}
	}
}

// An http:// upstream gets the request over plain HTTP, Host kept as the
// client sent it, and the client gets its answer over TLS.
func TestRelaysToPlainHTTP(t *testing.T) {
	var gotHost string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHost = r.Host
		io.WriteString(w, "plain answer")
	}))
	defer up.Close()
	px := tlsproxy.Start(t, up.URL, nil)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(px.CAPEM)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Get(px.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "plain answer" || resp.TLS == nil {
		t.Fatalf("answer %q (TLS %v), want the upstream's over TLS", body, resp.TLS != nil)
	}
	if want := strings.TrimPrefix(px.URL, "https://"); gotHost != want {
		t.Fatalf("upstream saw Host %q, want the client's %q", gotHost, want)
	}
}

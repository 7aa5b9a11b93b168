// Package tlsproxy is a reverse proxy that does nothing but relay: TLS in,
// TLS or plain HTTP out, the request's Host kept, so that a signed S3 or
// KMS request verifies at the server behind it. Issue 15's benchmark puts
// it in front of an S3 server as the floor vcon-server is measured
// against: whatever any server in the middle must pay (a second TLS hop,
// reading and writing HTTP). test/kit/kmstest puts it in front of
// local-kms, which speaks plain HTTP only, since vcon-server reaches a KMS
// over https alone.
package tlsproxy

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/testcert"
)

// Proxy is one running proxy.
type Proxy struct {
	URL   string // https://127.0.0.1:PORT
	CAPEM []byte // the CA of the proxy's own certificate
}

// Start relays to upstream until the test ends: an https URL whose
// certificate caPEM signs, or an http URL (caPEM nil), for a server that
// speaks no TLS.
func Start(t testing.TB, upstream string, caPEM []byte) *Proxy {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	rp := &httputil.ReverseProxy{
		// Rewrite leaves Out.Host as the client sent it: SigV4 signs Host.
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host
		},
		// As many idle connections as the benchmark's clients, as
		// vcon-server's own S3 client keeps (s3sig): no TLS handshake per
		// request on either side.
		Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: pool},
			MaxIdleConns:        128,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
	}
	pair, err := testcert.New("tlsproxy test CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := pair.TLS()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// HTTP/1.1 only, as the benchmark's clients speak to vcon-server: the
	// floor must not gain from a protocol the server is not asked to use.
	srv := &http.Server{Handler: rp, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}}}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return &Proxy{URL: "https://" + ln.Addr().String(), CAPEM: pair.CAPEM}
}

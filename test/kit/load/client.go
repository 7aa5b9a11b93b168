package load

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"
)

// NewClient is an HTTPS client that trusts caPEM (the server's certificate
// or its CA) and never decompresses: bytes are compared as stored.
func NewClient(caPEM []byte, conns int) (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("load: no PEM certificate in the CA file")
	}
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12},
		DisableCompression:  true,
		MaxIdleConnsPerHost: conns,
	}}, nil
}

// checkLoopback refuses a server that is not on this host: the generator
// is a test tool and must never load anyone else's service.
func checkLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("load: server URL %q: want https://127.0.0.1:PORT", raw)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("load: server URL %q is not on loopback; the load generator only runs against this host", raw)
	}
	return nil
}

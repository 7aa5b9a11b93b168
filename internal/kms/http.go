package kms

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// maxHeaderBytes bounds an answer's headers: a KMS sends a few hundred
// bytes of them.
const maxHeaderBytes = 16 << 10

// newHTTPClient is the client of one HTTP provider, its own, with the
// bounds every KMS call keeps: no proxy (one from the environment would
// see the key material cross it in its TLS, or be a place to send it),
// no redirect (a redirect would send the token or a signed request where
// the operator did not set), TLS 1.2 and up with caFile's roots when set,
// bounded headers. The time bound is each call's context (see post).
func newHTTPClient(caFile string) (*http.Client, error) {
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("cannot be read: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("holds no PEM certificate")
		}
		tlsConf.RootCAs = pool
	}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                  nil,
			DialContext:            (&net.Dialer{Timeout: Timeout, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:        tlsConf,
			TLSHandshakeTimeout:    Timeout,
			ForceAttemptHTTP2:      true,
			MaxIdleConnsPerHost:    8,
			IdleConnTimeout:        90 * time.Second,
			MaxResponseHeaderBytes: maxHeaderBytes,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// answer is a KMS's answer, read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// post sends req, made with newReq under a context bounded by Timeout,
// and reads the answer through the MaxAnswer bound. A transport failure
// is ErrUnreachable, except a certificate the CA does not vouch for
// (setup, not weather); a redirect and an answer over the bounds match
// neither sentinel. The caller reads the status. With again (a call that
// may be made twice: encrypt, decrypt), a call that got no whole answer
// is made once more within the same Timeout, so that one dropped
// connection does not fail a start or a tenant's request.
func post(ctx context.Context, c *http.Client, again bool, newReq func(context.Context) (*http.Request, error)) (*answer, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	a, err := postOnce(ctx, c, newReq)
	if again && errors.Is(err, ErrUnreachable) && ctx.Err() == nil {
		a, err = postOnce(ctx, c, newReq)
	}
	return a, err
}

func postOnce(ctx context.Context, c *http.Client, newReq func(context.Context) (*http.Request, error)) (*answer, error) {
	req, err := newReq(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, transportError(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer+1))
	if err != nil {
		return nil, unreachable("the answer (%d) broke off: %w", resp.StatusCode, plain(err))
	}
	if len(body) > MaxAnswer {
		return nil, fmt.Errorf("the answer (%d) is longer than %d KiB, far more than any KMS sends: not read; is the address that of the KMS?", resp.StatusCode, MaxAnswer>>10)
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return nil, fmt.Errorf("the answer is a redirect (%d to %s), which is not followed: set the address of the KMS itself", resp.StatusCode, origin(resp.Header.Get("Location")))
	}
	return &answer{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

// transportError says why no answer came. The URL of a *url.Error is
// left out: the Wrapper's name says where, and the path names the key once
// more.
func transportError(err error) error {
	err = plain(err)
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var notTLS tls.RecordHeaderError
	switch {
	case errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &invalid):
		return fmt.Errorf("the KMS's TLS certificate is not trusted (%w): set ca_file to the CA that signed it, or the address to a name it holds", err)
	case errors.As(err, &notTLS), strings.Contains(err.Error(), "gave HTTP response to HTTPS client"):
		// net/http turns the RecordHeaderError of an HTTP answer into text.
		return errors.New("the address answers without TLS: set it to the KMS's https port")
	case strings.Contains(err.Error(), "response headers exceeded"):
		// net/http's bound (MaxResponseHeaderBytes) has no error type.
		return fmt.Errorf("the answer's headers are longer than %d KiB, far more than any KMS sends: not read; is the address that of the KMS?", maxHeaderBytes>>10)
	case errors.Is(err, context.DeadlineExceeded):
		return unreachable("no answer within %s: %w", Timeout, err)
	}
	return unreachable("cannot reach the KMS: %w", err)
}

// plain drops a *url.Error's method and URL, keeping what it wraps.
func plain(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// origin is the scheme and host of a redirect's target, never its path or
// query, which may carry a token or a login state.
func origin(location string) string {
	u, err := url.Parse(location)
	if err != nil || u.Host == "" {
		return "another path"
	}
	return u.Scheme + "://" + u.Host
}

package kms_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/config"
	"github.com/vcon-server/vcon-server/internal/kms"
)

// The bounds every HTTP call keeps are the package's, not a provider's:
// these tests point both HTTP providers at servers that misbehave on
// purpose. What a real KMS answers is tested against local-kms
// (awskms_test.go) and Vault (vault_test.go).

const (
	testSecretKey = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
	testToken     = "hvs.CAESIJ-vcon-test-token-never-shown"
)

// misbehaving is a TLS server running handler, and a Wrapper per HTTP
// provider aimed at it.
func misbehaving(t *testing.T, handler http.HandlerFunc) map[string]kms.Wrapper {
	t.Helper()
	srv := httptest.NewTLSServer(handler)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	secret := filepath.Join(dir, "secret")
	token := filepath.Join(dir, "token")
	for path, b := range map[string][]byte{
		ca:     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
		secret: []byte(testSecretKey + "\n"),
		token:  []byte(testToken + "\n"),
	} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return map[string]kms.Wrapper{
		"awskms": newWrapper(t, &config.KMS{Provider: "awskms", AWSKMS: &config.AWSKMS{
			Region: "eu-west-1", KeyID: "alias/vcon", Endpoint: srv.URL,
			AccessKeyID: "AKIAVCONTEST", SecretAccessKeyFile: secret, CAFile: ca}}),
		"vault": newWrapper(t, &config.KMS{Provider: "vault", Vault: &config.Vault{
			Address: srv.URL, Mount: "transit", Key: "vcon-server", TokenFile: token, CAFile: ca}}),
	}
}

// A redirect is not followed, wherever it points: the second server never
// sees the token or the signed request, and the error names only the
// target's origin, never its path or query.
func TestRedirectRefused(t *testing.T) {
	var stolen atomic.Int64
	thief := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { stolen.Add(1) }))
	defer thief.Close()
	for name, w := range misbehaving(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, thief.URL+"/steal?state=abc", http.StatusTemporaryRedirect)
	}) {
		_, err := w.Wrap(context.Background(), randomBytes(t, 32), masterContext)
		text := wantKind(t, err, "encrypt", nil)
		if !strings.Contains(text, "redirect (307 to "+thief.URL+")") || strings.Contains(text, "steal") {
			t.Errorf("%s: %s: want the redirect and its origin only", name, text)
		}
	}
	if n := stolen.Load(); n != 0 {
		t.Errorf("the redirect's target got %d requests", n)
	}
}

// An answer longer than 64 KiB is not read, nor one whose headers pass
// 16 KiB; both match neither sentinel (a retry would get the same).
func TestHugeAnswerRefused(t *testing.T) {
	for name, w := range misbehaving(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"CiphertextBlob":"` + strings.Repeat("A", kms.MaxAnswer) + `"}`))
	}) {
		_, err := w.Wrap(context.Background(), randomBytes(t, 32), masterContext)
		if text := wantKind(t, err, "encrypt", nil); !strings.Contains(text, "longer than 64 KiB") {
			t.Errorf("%s: %s: want the bound named", name, text)
		}
	}
	for name, w := range misbehaving(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Padding", strings.Repeat("p", 20<<10))
		w.Write([]byte(`{}`))
	}) {
		_, err := w.Wrap(context.Background(), randomBytes(t, 32), masterContext)
		if text := wantKind(t, err, "encrypt", nil); !strings.Contains(text, "headers") {
			t.Errorf("%s: %s: want the headers' bound named", name, text)
		}
	}
}

// A KMS that takes the request and never answers is given up after
// Timeout: ErrUnreachable.
func TestNoAnswerUnreachable(t *testing.T) {
	defer func(d time.Duration) { kms.Timeout = d }(kms.Timeout)
	kms.Timeout = 300 * time.Millisecond
	for name, w := range misbehaving(t, func(w http.ResponseWriter, r *http.Request) {
		// With the body read, net/http watches the connection and ends
		// the request's context when the client gives up.
		io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		// No answer at all, whatever ended the wait: a 200 written when
		// the request's context ended early (seen under load) would reach
		// the client's second attempt as an empty answer.
		panic(http.ErrAbortHandler)
	}) {
		start := time.Now()
		_, err := w.Wrap(context.Background(), randomBytes(t, 32), masterContext)
		if text := wantKind(t, err, "encrypt", kms.ErrUnreachable); !strings.Contains(text, "no answer within 300ms") {
			t.Errorf("%s: %s: want the timeout named", name, text)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("%s: %v with a timeout of 300ms", name, took)
		}
	}
}

// 5xx and throttles are ErrUnreachable, other 4xx ErrRefused, for both
// providers' error shapes; AWS's throttle comes as a 400 with its type.
func TestStatusKinds(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
		kind   error
		only   string // the one provider the answer is for; "" for both
	}{
		{500, `{"__type":"KMSInternalException","errors":["internal error"]}`, kms.ErrUnreachable, ""},
		{503, `{"errors":["Vault is sealed"]}`, kms.ErrUnreachable, ""},
		{429, `{"errors":["request path \"transit/encrypt/vcon-server\": rate limit quota exceeded"]}`, kms.ErrUnreachable, ""},
		{403, `{"errors":["1 error occurred:\n\t* permission denied\n\n"]}`, kms.ErrRefused, ""},
		{400, `{"__type":"ThrottlingException","message":"Rate exceeded"}`, kms.ErrUnreachable, "awskms"},
		{400, `{"__type":"AccessDeniedException","Message":"not allowed"}`, kms.ErrRefused, "awskms"},
		{400, `{"errors":["encryption key not found"]}`, kms.ErrRefused, "vault"},
	} {
		for name, w := range misbehaving(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(c.status)
			w.Write([]byte(c.body))
		}) {
			if c.only != "" && c.only != name {
				continue
			}
			_, err := w.Wrap(context.Background(), randomBytes(t, 32), masterContext)
			text := wantKind(t, err, "encrypt", c.kind)
			if !strings.Contains(text, fmt.Sprint(c.status)) {
				t.Errorf("%s: %s: want the status %d", name, text, c.status)
			}
			t.Logf("%s %d: %s", name, c.status, text)
		}
	}
}

// A KMS whose error repeats the request (local-kms does, for a plaintext
// too long) has its message left out, so neither the plaintext, nor the
// token, nor the secret key reaches the error, in any form.
func TestEchoedSecretsLeftOut(t *testing.T) {
	key := randomBytes(t, 32)
	for name, w := range misbehaving(t, func(w http.ResponseWriter, r *http.Request) {
		var in map[string]any
		json.NewDecoder(r.Body).Decode(&in)
		echo := fmt.Sprintf("Value %v at Plaintext failed; token %s; secret %s", in, r.Header.Get("X-Vault-Token"), testSecretKey)
		w.WriteHeader(400)
		json.NewEncoder(w).Encode(map[string]any{"__type": "ValidationException", "message": echo, "errors": []string{echo}})
	}) {
		_, err := w.Wrap(context.Background(), key, masterContext)
		text := wantKind(t, err, "encrypt", kms.ErrRefused)
		noSecret(t, text, key, []byte(testToken), []byte(testSecretKey))
		if !strings.Contains(text, "left out") {
			t.Errorf("%s: %s: want the message left out", name, text)
		}
	}
}

// Without ca_file the server's private CA is not trusted: the error says
// to set ca_file, and matches neither sentinel (setup, not an outage).
func TestUntrustedCertificate(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte(testSecretKey), 0o600)
	w := newWrapper(t, &config.KMS{Provider: "awskms", AWSKMS: &config.AWSKMS{
		Region: "eu-west-1", KeyID: "alias/vcon", Endpoint: srv.URL, AccessKeyID: "AKIAVCONTEST", SecretAccessKeyFile: secret}})
	_, err := w.Wrap(context.Background(), randomBytes(t, 32), masterContext)
	if text := wantKind(t, err, "encrypt", nil); !strings.Contains(text, "set ca_file") {
		t.Errorf("%s: want ca_file named", text)
	}
}

// An address whose port speaks plain HTTP (local-kms's own, a Vault
// listener without TLS) is named as such, not as an outage.
func TestPlainHTTPPortNamed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	token := filepath.Join(t.TempDir(), "token")
	os.WriteFile(token, []byte(testToken), 0o600)
	w := newWrapper(t, &config.KMS{Provider: "vault", Vault: &config.Vault{
		Address: strings.Replace(srv.URL, "http://", "https://", 1), Mount: "transit", Key: "k", TokenFile: token}})
	_, err := w.Wrap(context.Background(), randomBytes(t, 32), masterContext)
	if text := wantKind(t, err, "encrypt", nil); !strings.Contains(text, "answers without TLS") {
		t.Errorf("%s: want the missing TLS named", text)
	}
}

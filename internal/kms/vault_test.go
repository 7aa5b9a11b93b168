package kms_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/config"
	"github.com/vcon-server/vcon-server/internal/kms"
	"github.com/vcon-server/vcon-server/test/kit/kmstest"
)

// vaultConfig is the [kms] table of transit key key on v, with v's token
// file as it is now.
func vaultConfig(v *kmstest.Vault, key string) *config.KMS {
	return &config.KMS{Provider: "vault", Vault: &config.Vault{
		Address: v.Address, Mount: v.Mount, Key: key, TokenFile: v.TokenFile, CAFile: v.CAFile}}
}

// vaultToken is the token v's token file holds now.
func vaultToken(t testing.TB, v *kmstest.Vault) []byte {
	t.Helper()
	b, err := os.ReadFile(v.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(b)
}

// A key wrapped by Vault's transit engine, the context as
// associated_data, comes back byte for byte; the ciphertext is Vault's
// string. The round trip's time is logged (median of 20).
func TestVaultRoundTrip(t *testing.T) {
	v := kmstest.StartVault(t)
	w := newWrapper(t, vaultConfig(v, v.Key))
	if want := `vault transit key "` + v.Key + `" at ` + v.Address; w.String() != want {
		t.Errorf("String() = %s, want %s", w, want)
	}
	roundTrips(t, w, "Vault (dev, TLS)", func(wrapped []byte) {
		if !bytes.HasPrefix(wrapped, []byte("vault:v1:")) {
			t.Fatalf("the ciphertext %q is not Vault's string", wrapped)
		}
	})
}

// Another context, another key, a damaged ciphertext and one that is not
// Vault's: all refused, the token in no error.
func TestVaultOtherContextRefused(t *testing.T) {
	ctx := context.Background()
	v := kmstest.StartVault(t)
	w := newWrapper(t, vaultConfig(v, v.Key))
	token := vaultToken(t, v)
	key := randomBytes(t, 32)
	wrapped, err := w.Wrap(ctx, key, masterContext)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]kms.Context{
		"another catalog": {"purpose": "master key", "catalog": "0f3a9d"},
		"a pair more":     {"purpose": "master key", "catalog": "0f3a9c", "tenant": "t"},
		"none":            nil,
	} {
		_, err := w.Unwrap(ctx, wrapped, c)
		text := wantKind(t, err, "decrypt", kms.ErrRefused)
		if !strings.Contains(text, "message authentication failed") || !strings.Contains(text, "another catalog or key") {
			t.Errorf("%s: %s: want Vault's reason and what it means", name, text)
		}
		noSecret(t, text, key, wrapped, token)
	}

	v.NewKey(t, "other")
	_, err = newWrapper(t, vaultConfig(v, "other")).Unwrap(ctx, wrapped, masterContext)
	noSecret(t, wantKind(t, err, "decrypt", kms.ErrRefused), key, wrapped, token)

	damaged := append([]byte{}, wrapped...)
	damaged[len(damaged)-3] ^= 1
	_, err = w.Unwrap(ctx, damaged, masterContext)
	noSecret(t, wantKind(t, err, "decrypt", kms.ErrRefused), key, wrapped, token)

	_, err = w.Unwrap(ctx, []byte("AQIDBAUG"), masterContext)
	if text := wantKind(t, err, "decrypt", kms.ErrRefused); !strings.Contains(text, "not of the form vault:v<n>:") {
		t.Errorf("%s: want the shape named", text)
	}

	// Decrypt never creates a key: a name that does not exist is refused.
	_, err = newWrapper(t, vaultConfig(v, "no-such-key")).Unwrap(ctx, wrapped, masterContext)
	if text := wantKind(t, err, "decrypt", kms.ErrRefused); !strings.Contains(text, "encryption key not found (400)") {
		t.Errorf("%s: want Vault's reason", text)
	}
}

// A token whose policy denies decrypt is refused with 403 and what to
// grant; encrypt still works with it; back to a token that may decrypt,
// the ciphertext made before opens.
func TestVaultDecryptDenied(t *testing.T) {
	ctx := context.Background()
	v := kmstest.StartVault(t)
	key := randomBytes(t, 32)
	wrapped, err := newWrapper(t, vaultConfig(v, v.Key)).Wrap(ctx, key, masterContext)
	if err != nil {
		t.Fatal(err)
	}

	v.DenyDecrypt(t)
	w := newWrapper(t, vaultConfig(v, v.Key))
	_, err = w.Unwrap(ctx, wrapped, masterContext)
	text := wantKind(t, err, "decrypt", kms.ErrRefused)
	if !strings.Contains(text, "permission denied (403)") || !strings.Contains(text, v.Mount+"/decrypt/"+v.Key) {
		t.Errorf("%s: want 403 and the path to grant", text)
	}
	noSecret(t, text, key, wrapped, vaultToken(t, v), []byte(v.Token))
	if _, err := w.Wrap(ctx, key, masterContext); err != nil {
		t.Errorf("encrypt with a token that may encrypt: %v", err)
	}

	v.AllowAll(t)
	got, err := newWrapper(t, vaultConfig(v, v.Key)).Unwrap(ctx, wrapped, masterContext)
	if err != nil {
		t.Fatalf("unwrap with decrypt allowed again: %v", err)
	}
	sameBytes(t, "unwrapped", got, key)
}

// A transit key that is not an AEAD cannot bind the context: Vault's
// refusal comes with the key types that can.
func TestVaultNonAEADKeyRefused(t *testing.T) {
	v := kmstest.StartVault(t)
	vaultRequest(t, v, "/v1/"+v.Mount+"/keys/rsa", `{"type":"rsa-2048"}`)
	_, err := newWrapper(t, vaultConfig(v, "rsa")).Wrap(context.Background(), randomBytes(t, 32), masterContext)
	text := wantKind(t, err, "encrypt", kms.ErrRefused)
	if !strings.Contains(text, "non-AEAD") || !strings.Contains(text, "aes256-gcm96 or chacha20-poly1305") {
		t.Errorf("%s: want Vault's reason and the key types that work", text)
	}
}

// Nothing listening at the address: ErrUnreachable.
func TestVaultUnreachable(t *testing.T) {
	v := kmstest.StartVault(t)
	cfg := vaultConfig(v, v.Key)
	cfg.Vault.Address = "https://127.0.0.1:" + closedPort(t)
	_, err := newWrapper(t, cfg).Wrap(context.Background(), randomBytes(t, 32), masterContext)
	if text := wantKind(t, err, "encrypt", kms.ErrUnreachable); !strings.Contains(text, "connection refused") {
		t.Errorf("%s: want connection refused", text)
	}
}

// vaultRequest makes one call to v's HTTP API with its root token.
func vaultRequest(t testing.TB, v *kmstest.Vault, path, body string) {
	t.Helper()
	pem, err := os.ReadFile(v.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, err := http.NewRequest(http.MethodPost, v.Address+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Vault-Token", v.Token)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("vault %s: %s", path, resp.Status)
	}
}

package kmstest

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// vaultToken reads TokenFile as a client under test would.
func vaultToken(t *testing.T, v *Vault) string {
	t.Helper()
	b, err := os.ReadFile(v.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func vaultEncrypt(t *testing.T, v *Vault, token, key string, plain, ad []byte) (int, string) {
	t.Helper()
	status, answer := v.CallAs(t, token, "POST", "/v1/"+v.Mount+"/encrypt/"+key, map[string]any{
		"plaintext":       base64.StdEncoding.EncodeToString(plain),
		"associated_data": base64.StdEncoding.EncodeToString(ad),
	})
	data, _ := answer["data"].(map[string]any)
	ct, _ := data["ciphertext"].(string)
	return status, ct
}

func vaultDecrypt(t *testing.T, v *Vault, token, key, ct string, ad []byte) (int, []byte) {
	t.Helper()
	status, answer := v.CallAs(t, token, "POST", "/v1/"+v.Mount+"/decrypt/"+key, map[string]any{
		"ciphertext":      ct,
		"associated_data": base64.StdEncoding.EncodeToString(ad),
	})
	data, _ := answer["data"].(map[string]any)
	p, _ := data["plaintext"].(string)
	plain, err := base64.StdEncoding.DecodeString(p)
	if err != nil {
		t.Fatalf("plaintext %q: %v", p, err)
	}
	return status, plain
}

// TestVaultTransitRoundTrip starts a real Vault and wraps and unwraps a key
// with associated data over its HTTP API, with the token from TokenFile;
// the wrong associated data, DenyDecrypt and AllowAll do what they say.
func TestVaultTransitRoundTrip(t *testing.T) {
	start := time.Now()
	v := StartVault(t)
	t.Logf("vault dev server at %s ready, transit and key %q made, in %v", v.Address, v.Key, time.Since(start).Round(time.Millisecond))

	if fi, err := os.Stat(v.TokenFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("TokenFile %s: %v, mode %v; want 0600", v.TokenFile, err, fi.Mode().Perm())
	}
	if _, err := os.Stat(v.CAFile); err != nil {
		t.Fatalf("CAFile: %v", err)
	}

	master := bytes.Repeat([]byte{0xA5}, 32)
	ad := []byte("catalog-id-1234")
	token := vaultToken(t, v)
	status, ct := vaultEncrypt(t, v, token, v.Key, master, ad)
	if status != http.StatusOK || !strings.HasPrefix(ct, "vault:v1:") {
		t.Fatalf("encrypt: status %d, ciphertext %q", status, ct)
	}
	status, got := vaultDecrypt(t, v, token, v.Key, ct, ad)
	if status != http.StatusOK || !bytes.Equal(got, master) {
		t.Fatalf("decrypt: status %d, %x; want 200, %x", status, got, master)
	}
	if status, _ := vaultDecrypt(t, v, token, v.Key, ct, []byte("catalog-id-9999")); status == http.StatusOK {
		t.Fatal("decrypt with other associated data: 200; want a refusal")
	}

	// A second key does not open the first key's ciphertext.
	v.NewKey(t, "tenant-a")
	if status, _ := vaultDecrypt(t, v, token, "tenant-a", ct, ad); status == http.StatusOK {
		t.Fatal("decrypt with another key: 200; want a refusal")
	}

	v.DenyDecrypt(t)
	denied := vaultToken(t, v)
	if denied == token {
		t.Fatal("DenyDecrypt left the token in TokenFile as it was")
	}
	if status, _ := vaultEncrypt(t, v, denied, "tenant-a", master, ad); status != http.StatusOK {
		t.Fatalf("encrypt after DenyDecrypt: status %d; want 200", status)
	}
	if status, _ := vaultDecrypt(t, v, denied, v.Key, ct, ad); status != http.StatusForbidden {
		t.Fatalf("decrypt after DenyDecrypt: status %d; want 403", status)
	}

	v.AllowAll(t)
	allowed := vaultToken(t, v)
	if status, got := vaultDecrypt(t, v, allowed, v.Key, ct, ad); status != http.StatusOK || !bytes.Equal(got, master) {
		t.Fatalf("decrypt after AllowAll: status %d, %x; want 200, %x", status, got, master)
	}
	if allowed == v.Token {
		t.Fatal("AllowAll wrote the root token; want a token of its own policy")
	}
}

// TestVaultTwoServers runs two at once: each has its own ports, CA and
// token.
func TestVaultTwoServers(t *testing.T) {
	a, b := StartVault(t), StartVault(t)
	if a.Address == b.Address || a.Token == b.Token {
		t.Fatalf("two servers share %s / a token", a.Address)
	}
	ad := []byte("x")
	_, ct := vaultEncrypt(t, a, a.Token, a.Key, []byte("secret"), ad)
	if status, _ := vaultDecrypt(t, b, b.Token, b.Key, ct, ad); status == http.StatusOK {
		t.Fatal("the other server's key of the same name opened the ciphertext")
	}
}

// Package kmstest starts real KMS servers for tests: HashiCorp Vault in
// dev mode with TLS (its transit engine, vault.go), and local-kms, an AWS
// KMS API server, behind tlsproxy (localkms.go). The binaries are
// installed by scripts/install-test-tools.sh and run as external programs
// only (Vault is BUSL-1.1: never imported; the project's go.mod does not
// name it). Tests speak to them over plain
// net/http, as the server's own providers do.
//
// Without a binary the test is skipped, loudly; with CI=true it fails
// instead: CI must never pass by skipping its real-KMS tests.
package kmstest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/toolbin"

	"github.com/vcon-server/vcon-server/test/kit/freeport"
)

// VaultEnv names the variable that points at a vault binary; without it
// the tools directory (toolbin.Dir), then PATH, are searched.
const VaultEnv = "VCON_TEST_VAULT"

// Vault is one running Vault dev server (vault server -dev -dev-tls), its
// transit engine mounted at Mount with the aes256-gcm96 key Key.
type Vault struct {
	Address   string // https://127.0.0.1:PORT
	CAFile    string // PEM of the CA that -dev-tls made and signed the server's certificate with
	TokenFile string // 0600 file with the token a client under test should use; DenyDecrypt and AllowAll change what it holds
	Token     string // the root token (never changes)
	Mount     string // "transit"
	Key       string // "vcon-server"

	logFile string
	client  *http.Client
	mu      sync.Mutex // serialises the writes of TokenFile
}

// VaultBinary finds the vault program: $VCON_TEST_VAULT, else the tools
// directory, else PATH. It returns "" when there is none.
func VaultBinary() string { return toolbin.Find("vault", VaultEnv) }

// StartVault runs `vault server -dev -dev-tls` until the test ends: its
// own temporary folder, a free loopback port (and the one after it, its
// cluster port), no mlock, a random root token. It then mounts the transit
// engine at "transit", creates the aes256-gcm96 key "vcon-server", writes
// the root token to TokenFile (0600), and returns.
func StartVault(t testing.TB) *Vault {
	t.Helper()
	bin := toolbin.Require(t, "vault", VaultEnv)
	dir := t.TempDir()
	v := &Vault{
		CAFile:    filepath.Join(dir, "certs", "vault-ca.pem"), // where -dev-tls-cert-dir puts it
		TokenFile: filepath.Join(dir, "vault.token"),
		Token:     "vcon-root-" + toolbin.RandomHex(16),
		Mount:     "transit",
		Key:       "vcon-server",
		logFile:   filepath.Join(dir, "vault.log"),
	}
	// A port taken between picking and listening makes the server exit at
	// once; try again on another.
	var lastErr error
	for try := 0; try < 3; try++ {
		if lastErr = v.start(t, bin, dir); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		log, _ := os.ReadFile(v.logFile)
		t.Fatalf("kmstest: vault did not start: %v\n--- %s ---\n%s", lastErr, v.logFile, toolbin.Tail(log, 8<<10))
	}
	v.call(t, "POST", "/v1/sys/mounts/"+v.Mount, map[string]any{"type": "transit"}, nil)
	v.NewKey(t, v.Key)
	v.writeToken(t, v.Token)
	return v
}

func (v *Vault) start(t testing.TB, bin, dir string) error {
	port, err := vaultFreePortPair()
	if err != nil {
		return err
	}
	v.Address = "https://127.0.0.1:" + strconv.Itoa(port)
	// A try before this one may have left its certificates (read-only
	// files): each start makes a new CA.
	certs := filepath.Dir(v.CAFile)
	v.client = nil
	if err := os.RemoveAll(certs); err != nil {
		return err
	}
	if err := os.MkdirAll(certs, 0o700); err != nil {
		return err
	}
	// The root token goes in the environment, not the arguments; the
	// caller's VAULT_* settings are left out, and HOME is the temporary
	// folder so that nothing is written to the real one.
	env := []string{"HOME=" + dir, "VAULT_DEV_ROOT_TOKEN_ID=" + v.Token}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VAULT_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	cmd := exec.Command(bin, "server", "-dev", "-dev-tls",
		"-dev-tls-cert-dir="+certs,
		"-dev-listen-address=127.0.0.1:"+strconv.Itoa(port),
		"-dev-no-store-token")
	cmd.Dir = dir
	cmd.Env = env
	logf, err := os.OpenFile(v.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); logf.Close() }()

	if err := v.waitReady(exited); err != nil {
		cmd.Process.Kill()
		<-exited
		return err
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			if log, err := os.ReadFile(v.logFile); err == nil && len(log) > 0 {
				t.Logf("--- vault output (%s) ---\n%s", v.logFile, toolbin.Tail(log, 8<<10))
			}
		}
	})
	return nil
}

// waitReady waits for the CA file that -dev-tls writes, then polls
// /v1/sys/health until it answers 200 (initialised, unsealed, active).
func (v *Vault) waitReady(exited <-chan error) error {
	deadline := time.Now().Add(60 * time.Second)
	var last error = errors.New("no answer yet")
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("vault exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within 60s: %v", last)
		}
		if v.client == nil {
			if c, err := vaultClient(v.CAFile); err == nil {
				v.client = c
			} else {
				last = err
			}
		}
		if v.client != nil {
			resp, err := v.client.Get(v.Address + "/v1/sys/health")
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
				err = fmt.Errorf("/v1/sys/health answered %s", resp.Status)
			}
			last = err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// vaultClient trusts the CA in caFile alone; it takes no proxy from the
// environment and follows no redirect.
func vaultClient(caFile string) (*http.Client, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", caFile)
	}
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			Proxy:           nil,
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// Client is an HTTP client that trusts the server's CA (no proxy, no
// redirects, 10 s per request).
func (v *Vault) Client() *http.Client { return v.client }

// Call sends body (JSON, when not nil) to path ("/v1/...") with the root
// token and returns the status and the answer's JSON (nil when empty). It
// fails the test only when no answer comes; the status is the caller's.
func (v *Vault) Call(t testing.TB, method, path string, body any) (int, map[string]any) {
	t.Helper()
	return v.CallAs(t, v.Token, method, path, body)
}

// CallAs is Call with token instead of the root token.
func (v *Vault) CallAs(t testing.TB, token, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatalf("kmstest: %v", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, v.Address+path, rd)
	if err != nil {
		t.Fatalf("kmstest: %v", err)
	}
	req.Header.Set("X-Vault-Token", token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := v.client.Do(req)
	if err != nil {
		t.Fatalf("kmstest: vault %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatalf("kmstest: vault %s %s: reading the answer: %v", method, path, err)
	}
	var out map[string]any
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("kmstest: vault %s %s: %s: not JSON: %q", method, path, resp.Status, toolbin.Tail(raw, 512))
		}
	}
	return resp.StatusCode, out
}

// call is Call that fails the test on any status but 2xx, and decodes
// the answer into out when out is not nil.
func (v *Vault) call(t testing.TB, method, path string, body any, out *map[string]any) {
	t.Helper()
	status, answer := v.Call(t, method, path, body)
	if status/100 != 2 {
		t.Fatalf("kmstest: vault %s %s: status %d: %v", method, path, status, answer["errors"])
	}
	if out != nil {
		*out = answer
	}
}

// NewKey creates another aes256-gcm96 transit key, name, under Mount.
func (v *Vault) NewKey(t testing.TB, name string) {
	t.Helper()
	v.call(t, "POST", "/v1/"+v.Mount+"/keys/"+name, map[string]any{"type": "aes256-gcm96"}, nil)
}

// The policies DenyDecrypt and AllowAll hand out.
const (
	vaultPolicyNoDecrypt = `
path "%[1]s/encrypt/*" { capabilities = ["update"] }
path "%[1]s/keys/*" { capabilities = ["read"] }
path "%[1]s/decrypt/*" { capabilities = ["deny"] }
path "%[1]s/rewrap/*" { capabilities = ["deny"] }
`
	vaultPolicyAll = `
path "%[1]s/*" { capabilities = ["create", "read", "update", "delete", "list"] }
`
)

// DenyDecrypt makes a new token whose policy lets it encrypt with every
// key of Mount (and read the keys) but not decrypt (nor rewrap), and writes
// it to TokenFile: a client that reads TokenFile afresh can wrap but no
// longer unwrap, as when a tenant revokes the server's grant.
func (v *Vault) DenyDecrypt(t testing.TB) {
	t.Helper()
	v.writeToken(t, v.policyToken(t, "vcon-no-decrypt", vaultPolicyNoDecrypt))
}

// AllowAll makes a new token whose policy lets it do everything under
// Mount (encrypt, decrypt, keys) and writes it to TokenFile: the grant
// given back after DenyDecrypt.
func (v *Vault) AllowAll(t testing.TB) {
	t.Helper()
	v.writeToken(t, v.policyToken(t, "vcon-all", vaultPolicyAll))
}

// policyToken writes the ACL policy name (text with %[1]s for the mount)
// and returns a new token that holds it (and Vault's default policy).
func (v *Vault) policyToken(t testing.TB, name, text string) string {
	t.Helper()
	v.call(t, "PUT", "/v1/sys/policies/acl/"+name, map[string]any{"policy": fmt.Sprintf(text, v.Mount)}, nil)
	var answer map[string]any
	v.call(t, "POST", "/v1/auth/token/create", map[string]any{"policies": []string{name}, "ttl": "24h"}, &answer)
	auth, _ := answer["auth"].(map[string]any)
	token, _ := auth["client_token"].(string)
	if token == "" {
		t.Fatalf("kmstest: vault made no token for policy %s", name)
	}
	return token
}

// writeToken replaces TokenFile's content in one rename, so a reader
// never sees a half-written token.
func (v *Vault) writeToken(t testing.TB, token string) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	tmp := v.TokenFile + ".new"
	if err := os.WriteFile(tmp, []byte(token+"\n"), 0o600); err != nil {
		t.Fatalf("kmstest: %v", err)
	}
	if err := os.Rename(tmp, v.TokenFile); err != nil {
		t.Fatalf("kmstest: %v", err)
	}
}

// vaultFreePortPair finds a loopback port p with p+1 free too: a dev
// server listens on p and its cluster listener on p+1.
func vaultFreePortPair() (int, error) { return freeport.Pair() }

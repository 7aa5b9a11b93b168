package kms

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/vcon-server/vcon-server/internal/config"
)

// vault is provider vault: the encrypt and decrypt endpoints of a transit
// key (HashiCorp Vault, or OpenBao, which speaks the same API), the
// context as associated_data.
//
// Vault's encrypt creates a key that does not exist when the token may
// "create" on the path; a token that may only "update"
// {mount}/encrypt/{key} and {mount}/decrypt/{key} cannot turn a mistyped
// key name into a new key (docs/keys.md).
type vault struct {
	address, mount, key string
	name                string
	token               string
	client              *http.Client
}

func newVault(c *config.Vault) (*vault, error) {
	w := &vault{address: c.Address, mount: c.Mount, key: c.Key}
	w.name = fmt.Sprintf("vault transit key %q at %s", c.Key, c.Address)
	if c.Mount != "transit" {
		w.name += fmt.Sprintf(" (mount %q)", c.Mount)
	}
	var err error
	if w.token, err = readSecretFile(c.TokenFile); err != nil {
		return nil, w.fail("read token_file", err)
	}
	if w.client, err = newHTTPClient(c.CAFile); err != nil {
		return nil, w.fail("read ca_file", fmt.Errorf("%s %w", c.CAFile, err))
	}
	return w, nil
}

func (w *vault) String() string { return w.name }

func (w *vault) fail(op string, err error) error {
	return &Error{Provider: "vault", Key: w.key, Op: op, Err: err, name: w.name}
}

func (w *vault) Wrap(ctx context.Context, plaintext []byte, c Context) ([]byte, error) {
	if err := checkPlaintext(plaintext); err != nil {
		return nil, w.fail("encrypt", err)
	}
	ad, err := canonical(c)
	if err != nil {
		return nil, w.fail("encrypt", err)
	}
	in := map[string]string{
		"plaintext":       base64.StdEncoding.EncodeToString(plaintext),
		"associated_data": base64.StdEncoding.EncodeToString(ad),
	}
	var out struct {
		Data struct{ Ciphertext string } `json:"data"`
	}
	if err := w.call(ctx, "encrypt", in, &out, plaintext); err != nil {
		return nil, w.fail("encrypt", err)
	}
	if !isVaultCiphertext(out.Data.Ciphertext) {
		return nil, w.fail("encrypt", fmt.Errorf("the answer holds no ciphertext of the form vault:v<n>:<base64>"))
	}
	return []byte(out.Data.Ciphertext), nil
}

// Unwrap takes Vault's ciphertext string, as Wrap returned its bytes.
func (w *vault) Unwrap(ctx context.Context, ciphertext []byte, c Context) ([]byte, error) {
	if err := checkCiphertext(ciphertext); err != nil {
		return nil, w.fail("decrypt", err)
	}
	if !isVaultCiphertext(string(ciphertext)) {
		return nil, w.fail("decrypt", refused("the ciphertext is not of the form vault:v<n>:<base64>: the wrapped key file was not made by Vault, or was altered"))
	}
	ad, err := canonical(c)
	if err != nil {
		return nil, w.fail("decrypt", err)
	}
	in := map[string]string{
		"ciphertext":      string(ciphertext),
		"associated_data": base64.StdEncoding.EncodeToString(ad),
	}
	var out struct {
		Data struct{ Plaintext string } `json:"data"`
	}
	if err := w.call(ctx, "decrypt", in, &out, ciphertext); err != nil {
		return nil, w.fail("decrypt", err)
	}
	p, err := base64.StdEncoding.DecodeString(out.Data.Plaintext)
	if err != nil || len(p) == 0 {
		return nil, w.fail("decrypt", fmt.Errorf("the answer holds no base64 plaintext"))
	}
	return p, nil
}

// isVaultCiphertext is the shape of a transit ciphertext: vault:v1:...,
// printable ASCII only (it goes into a JSON string as it is).
func isVaultCiphertext(s string) bool {
	rest, ok := strings.CutPrefix(s, "vault:v")
	if !ok {
		return false
	}
	version, b64, ok := strings.Cut(rest, ":")
	if !ok || version == "" || b64 == "" || strings.Trim(version, "0123456789") != "" {
		return false
	}
	return !strings.ContainsFunc(b64, func(r rune) bool { return r <= ' ' || r > '~' })
}

// call posts to {mount}/{op}/{key} and decodes a 200's body into out.
// secret is the request's plaintext or ciphertext, kept out of errors.
func (w *vault) call(ctx context.Context, op string, in, out any, secret []byte) error {
	body, err := w.request(ctx, http.MethodPost, op, w.mount+"/"+op+"/"+url.PathEscape(w.key), in, secret)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("the answer (200) is not the JSON of transit %s: %v", op, err)
	}
	return nil
}

// request sends method to /v1/path with in as its JSON body (none when
// nil) and returns the body of a 200 or 204; op names the call in errors.
func (w *vault) request(ctx context.Context, method, op, path string, in any, secret []byte) ([]byte, error) {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return nil, err
		}
	}
	target := w.address + "/v1/" + path
	again := op == "encrypt" || op == "decrypt"
	a, err := post(ctx, w.client, again, func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Vault-Token", w.token)
		// Vault Agent and proxies in front of Vault ask for it, against
		// requests forged from a browser.
		req.Header.Set("X-Vault-Request", "true")
		return req, nil
	})
	if err != nil {
		return nil, err
	}
	if a.status != http.StatusOK && a.status != http.StatusNoContent {
		return nil, w.refusal(op, a, secret)
	}
	return a.body, nil
}

// NewKey makes the transit key label, of type aes256-gcm96, and returns
// its name. It refuses a key that exists: another's key is never taken.
func (w *vault) NewKey(ctx context.Context, label string) (string, error) {
	path := w.mount + "/keys/" + url.PathEscape(label)
	if _, err := w.request(ctx, http.MethodGet, "read key", path, nil, nil); err == nil {
		return "", w.fail("create key", refused("the transit key %q exists already", label))
	}
	if _, err := w.request(ctx, http.MethodPost, "create key", path, map[string]string{"type": "aes256-gcm96"}, nil); err != nil {
		return "", w.fail("create key", err)
	}
	return label, nil
}

// DeleteKey deletes the transit key at once: it allows the deletion in
// the key's configuration first, as Vault requires.
func (w *vault) DeleteKey(ctx context.Context, key string) error {
	path := w.mount + "/keys/" + url.PathEscape(key)
	if _, err := w.request(ctx, http.MethodPost, "allow deletion", path+"/config", map[string]bool{"deletion_allowed": true}, nil); err != nil {
		return w.fail("delete key", err)
	}
	if _, err := w.request(ctx, http.MethodDelete, "delete key", path, nil, nil); err != nil {
		return w.fail("delete key", err)
	}
	return nil
}

// refusal turns an error answer into an error: 5xx (a sealed Vault, a
// standby), 408, 412 (a performance standby behind) and 429 are
// ErrUnreachable; any other 4xx is ErrRefused.
func (w *vault) refusal(op string, a *answer, secret []byte) error {
	var e struct {
		Errors []string `json:"errors"`
	}
	_ = json.Unmarshal(a.body, &e) // a body that is not JSON says nothing more than its status
	msg := scrub(vaultMessage(e.Errors), secret, []byte(w.token))
	if msg == "" {
		msg = http.StatusText(a.status)
	}
	text := fmt.Sprintf("%s (%d)", msg, a.status)
	if hint := w.hint(op, a.status, msg); hint != "" {
		text += ": " + hint
	}
	switch {
	case a.status >= 500, a.status == http.StatusRequestTimeout, a.status == http.StatusPreconditionFailed, a.status == http.StatusTooManyRequests:
		return unreachable("%s", text)
	case a.status >= 400:
		return refused("%s", text)
	}
	return fmt.Errorf("an unexpected answer: %s", text)
}

// vaultMessage joins Vault's errors, without the "1 error occurred: *"
// frame its multierror adds.
func vaultMessage(errs []string) string {
	msg := strings.Join(strings.Fields(strings.Join(errs, "; ")), " ")
	if _, rest, ok := strings.Cut(msg, " occurred: * "); ok && strings.Contains(msg[:len(msg)-len(rest)], "error") {
		msg = strings.ReplaceAll(rest, " * ", "; ")
	}
	return msg
}

// hint says what to do about what an operator meets.
func (w *vault) hint(op string, status int, msg string) string {
	path := w.mount + "/" + op + "/" + w.key
	switch {
	case status == http.StatusForbidden && strings.Contains(op, " "):
		return fmt.Sprintf("the token may not manage the keys of tenants: grant \"create\", \"read\" and \"delete\" on %s/keys/* and \"update\" on %s/keys/+/config, %s/encrypt/* and %s/decrypt/* in its policy (docs/keys.md)", w.mount, w.mount, w.mount, w.mount)
	case status == http.StatusForbidden:
		return fmt.Sprintf("the token may not use %s, or has expired: grant \"update\" on that path in its policy, or renew it (kms.vault.token_file)", path)
	case strings.Contains(msg, "encryption key not found"):
		return fmt.Sprintf("there is no transit key %q at mount %q: check kms.vault.key and mount", w.key, w.mount)
	case strings.Contains(msg, "message authentication failed"):
		return "the ciphertext was not made by this key under this context: the wrapped key file belongs to another catalog or key, or was altered"
	case strings.Contains(msg, "non-AEAD"):
		return fmt.Sprintf("transit key %q must be of type aes256-gcm96 or chacha20-poly1305, which bind associated_data: make such a key and set kms.vault.key to it", w.key)
	case strings.Contains(msg, "sealed"):
		return "unseal it (vault operator unseal)"
	case status == http.StatusNotFound:
		return fmt.Sprintf("nothing answers at %s: is the transit engine mounted at %q?", path, w.mount)
	}
	return ""
}

// Package kms wraps and unwraps keys with a key that never leaves a key
// management service: a transit key of HashiCorp Vault or OpenBao
// (vault.go), a key of AWS KMS or of a service that speaks its JSON API
// (awskms.go), or an external program such as an HSM's own tool
// (command.go), so that the binary needs no cgo. The master key file then
// holds only the KMS's ciphertext of the master key (docs/keys.md).
//
// # Context
//
// Every ciphertext is bound to a Context, pairs such as {"purpose": "master
// key", "catalog": "<catalog id>"}, and unwraps only with the same pairs:
// a master key file copied beside another catalog does not open there.
// AWS KMS takes the pairs as its EncryptionContext. Vault and commands
// take them in one canonical encoding, a JSON object whose members are
// sorted by key (bytewise), without white space, each string as Go's
// encoding/json writes it without HTML escaping (quote, backslash and
// control characters escaped, everything else UTF-8):
//
//	{"catalog":"0f3a...","purpose":"master key"}
//
// Sorting makes the encoding of equal pairs equal; JSON makes distinct
// pairs encode differently. Keys and values must be valid UTF-8 (which
// JSON would otherwise silently replace) and keys non-empty. Vault gets it
// base64-encoded as associated_data, which is why its transit key must be
// an AEAD type (aes256-gcm96, aes128-gcm96 or chacha20-poly1305).
//
// # The command contract
//
// Provider command runs [kms.command]'s wrap or unwrap argv directly (no
// shell) with:
//
//   - stdin: the plaintext to wrap (1 to 4096 bytes), or the ciphertext to
//     unwrap, exactly the bytes a wrap printed;
//   - environment: VCON_KMS_OP=wrap or VCON_KMS_OP=unwrap,
//     VCON_KMS_CONTEXT=<the canonical encoding above>, and PATH and HOME
//     as the server has them; nothing else of the server's environment;
//     working directory /;
//   - stdout: the result, at most 64 KiB (a program that prints more is
//     killed), taken only on exit status 0;
//   - stderr: its first line (up to 512 bytes) goes into the error the
//     server reports, so it must never hold key material;
//   - exit status 0 for success, 2 when the KMS refuses (key disabled,
//     deleted, not granted, ciphertext or context wrong: ErrRefused,
//     which is not retried soon), anything else for a failure that may
//     pass (device busy or unreachable: ErrUnreachable);
//   - 10 seconds: then it is killed and the call fails as ErrUnreachable.
//
// An unwrap must fail unless VCON_KMS_CONTEXT is the one the wrap saw, as
// an AEAD does with associated data.
//
// # What never leaves this package
//
// No error or message holds a token, secret key, plaintext, ciphertext or
// request body; a KMS's own error text is kept only when it repeats none
// of them. Every call is bounded: Timeout, 64 KiB of answer, no redirect
// followed, no proxy taken from the environment.
package kms

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vcon-server/vcon-server/internal/config"
)

// A Wrapper wraps and unwraps a key with a key that never leaves the KMS.
// It is safe for concurrent use.
type Wrapper interface {
	// Wrap returns the KMS's ciphertext of plaintext (at most 4 KiB), bound to
	// context: AWS KMS's EncryptionContext, Vault transit's associated_data,
	// the command's VCON_KMS_CONTEXT. Unwrap with another context fails.
	Wrap(ctx context.Context, plaintext []byte, context Context) ([]byte, error)
	Unwrap(ctx context.Context, ciphertext []byte, context Context) ([]byte, error)
	// String names the provider and key for messages, never a secret:
	// `vault transit key "vcon-server" at https://vault.example.com:8200`,
	// `awskms key "alias/vcon" in eu-west-1`, `command /usr/local/bin/hsm-wrap`.
	String() string
}

// A KeyAdmin makes keys of its service and deletes them: the keys the
// server makes for its tenants (docs/keys.md). The vault and awskms
// Wrappers are KeyAdmins, with the credentials of [kms].
type KeyAdmin interface {
	// NewKey makes a key, described or named by label, and returns the
	// name ForKey takes.
	NewKey(ctx context.Context, label string) (string, error)
	// DeleteKey deletes key (Vault, at once) or schedules its deletion
	// (AWS KMS, after 7 days, refusing every use meanwhile).
	DeleteKey(ctx context.Context, key string) error
}

// Context is what a ciphertext is bound to: sorted key/value pairs, e.g.
// {"purpose": "master key", "catalog": "<catalog id hex>"}. Not secret.
type Context map[string]string

const (
	// MaxPlaintext is the most Wrap takes: AWS KMS's limit, and far more
	// than a key.
	MaxPlaintext = 4096
	// MaxAnswer bounds what is read of a KMS's answer, and of a command's
	// output: a key's ciphertext is a few hundred bytes.
	MaxAnswer = 64 << 10
)

// Timeout bounds each call to the KMS, from the first byte sent to the
// last read, or a command's whole run. A variable so that tests can
// shorten it; set it before the calls it is to bound.
var Timeout = 10 * time.Second

// New makes the Wrapper of the [kms] table, reading the token or secret
// key file it names (refused when group or others may read it) and its CA
// file. It makes no call to the KMS.
func New(cfg *config.KMS) (Wrapper, error) {
	if cfg == nil {
		return nil, errors.New("kms: no [kms] table")
	}
	switch {
	case cfg.Provider == "vault" && cfg.Vault != nil:
		return newVault(cfg.Vault)
	case cfg.Provider == "awskms" && cfg.AWSKMS != nil:
		return newAWS(cfg.AWSKMS)
	case cfg.Provider == "command" && cfg.Command != nil:
		return newCommand(cfg.Command)
	}
	return nil, fmt.Errorf("kms: provider %q without its [kms.%s] table", cfg.Provider, cfg.Provider)
}

// ForKey makes the Wrapper of cfg's provider and credentials for another
// key of the same service: a tenant's own key (docs/keys.md), a transit
// key's name for Vault, a key id, ARN or alias for AWS KMS, and for a
// command the value of VCON_KMS_KEY in its environment.
func ForKey(cfg *config.KMS, key string) (Wrapper, error) {
	if err := ValidKey(cfg, key); err != nil {
		return nil, err
	}
	c := *cfg
	switch {
	case c.Vault != nil:
		v := *c.Vault
		v.Key, c.Vault = key, &v
	case c.AWSKMS != nil:
		a := *c.AWSKMS
		a.KeyID, c.AWSKMS = key, &a
	case c.Command != nil:
		w, err := newCommand(c.Command)
		if err != nil {
			return nil, err
		}
		w.key = key
		w.name += fmt.Sprintf(" for key %q", key)
		return w, nil
	}
	return New(&c)
}

// ValidKey refuses a key name that cannot go into the provider's URL
// paths, headers or environment as it is.
func ValidKey(cfg *config.KMS, key string) error {
	bad := func(r rune) bool { return r <= ' ' || r == 0x7f }
	if cfg.Provider == "vault" {
		bad = func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.", r))
		}
	}
	if key == "" || len(key) > 256 || strings.ContainsFunc(key, bad) {
		return &KeyNameError{fmt.Sprintf("%q is not a %s key name: at most 256 characters, letters, digits and - _ . for vault, no white space or control characters otherwise", key, cfg.Provider)}
	}
	return nil
}

// KeyNameError is ValidKey's refusal: the caller's mistake, never the
// service's.
type KeyNameError struct{ msg string }

func (e *KeyNameError) Error() string { return e.msg }

// canonical is the encoding of c the package comment describes.
func canonical(c Context) ([]byte, error) {
	keys := make([]string, 0, len(c))
	for k, v := range c {
		if k == "" {
			return nil, errors.New("a context key is empty")
		}
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, fmt.Errorf("the context's %q is not valid UTF-8", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		// Encode writes a newline after each value; it is cut below.
		if err := enc.Encode(k); err != nil {
			return nil, err
		}
		b.Truncate(b.Len() - 1)
		b.WriteByte(':')
		if err := enc.Encode(c[k]); err != nil {
			return nil, err
		}
		b.Truncate(b.Len() - 1)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// checkPlaintext refuses what no KMS wraps. Such a call is the caller's
// mistake, so the error matches neither sentinel.
func checkPlaintext(p []byte) error {
	if len(p) == 0 || len(p) > MaxPlaintext {
		return fmt.Errorf("a plaintext of %d bytes: a KMS wraps 1 to %d", len(p), MaxPlaintext)
	}
	return nil
}

// checkCiphertext refuses what no wrap returned.
func checkCiphertext(c []byte) error {
	if len(c) == 0 || len(c) > MaxAnswer {
		return refused("a ciphertext of %d bytes, which no wrap returns (1 to %d): the wrapped key file is damaged or not one", len(c), MaxAnswer)
	}
	return nil
}

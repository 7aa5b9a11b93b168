package kms

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// The two kinds of failure a caller acts on, matched with errors.Is. An
// error that matches neither is a mistake of setup or of the KMS's answer
// (a redirect, an answer too long or not understood, a wrong CA file): a
// retry does not help and no grant fixes it.
var (
	// ErrRefused: the KMS answered no. Access denied, the key disabled,
	// pending deletion, deleted or not found, the ciphertext not made by
	// the key or under another context. Asking again gives the same answer
	// until someone changes the key or its grants.
	ErrRefused = errors.New("kms: refused")
	// ErrUnreachable: no answer, or one that says to come back: connection
	// refused, a timeout, a 5xx, a throttle, a sealed Vault, a command
	// that failed other than by exit status 2.
	ErrUnreachable = errors.New("kms: unreachable")
)

// Error is a failed KMS call. Its message names the provider, key and
// operation, and never a secret:
//
//	kms: vault transit key "k" at https://vault:8200: decrypt: permission denied (403): ...
type Error struct {
	Provider string // "vault", "awskms" or "command"
	Key      string // the transit key, the AWS key id, the program
	Op       string // "encrypt", "decrypt", "wrap", "unwrap", "read token_file"
	Err      error

	name string // the Wrapper's String(), where the key lives
}

func (e *Error) Error() string {
	name := e.name
	if name == "" {
		name = fmt.Sprintf("%s key %q", e.Provider, e.Key)
	}
	return "kms: " + name + ": " + e.Op + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// kinded is an error of a kind: its text is err's, and errors.Is matches
// kind as well as whatever err wraps.
type kinded struct {
	kind error
	err  error
}

func (k *kinded) Error() string        { return k.err.Error() }
func (k *kinded) Unwrap() error        { return k.err }
func (k *kinded) Is(target error) bool { return target == k.kind }

func refused(format string, args ...any) error {
	return &kinded{ErrRefused, fmt.Errorf(format, args...)}
}

func unreachable(format string, args ...any) error {
	return &kinded{ErrUnreachable, fmt.Errorf(format, args...)}
}

// maxMessage bounds the part of a KMS's or a program's own text an error
// keeps: enough for a reason, never a dump.
const maxMessage = 512

// scrub makes a KMS's or a program's own text fit for an error: one line,
// printable, bounded; and left out entirely when it repeats a secret of
// the request in any form a server might echo it (raw, base64, hex). Some
// servers do: local-kms puts a too-long plaintext into its message.
func scrub(msg string, secrets ...[]byte) string {
	for _, s := range secrets {
		if len(s) < 4 {
			continue // too short to search for without false alarms
		}
		forms := [][]byte{s, []byte(base64.StdEncoding.EncodeToString(s)),
			[]byte(base64.RawStdEncoding.EncodeToString(s)), []byte(base64.RawURLEncoding.EncodeToString(s)),
			[]byte(hex.EncodeToString(s))}
		for _, f := range forms {
			if bytes.Contains([]byte(msg), f) || bytes.Contains([]byte(strings.ToLower(msg)), f) {
				return "(its message is left out: it repeats the request)"
			}
		}
	}
	msg = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || r == '\uFFFD' {
			return ' '
		}
		return r
	}, msg)
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > maxMessage {
		cut := maxMessage
		for cut > 0 && msg[cut]&0xC0 == 0x80 {
			cut-- // not inside a UTF-8 sequence
		}
		msg = msg[:cut] + "..."
	}
	return msg
}

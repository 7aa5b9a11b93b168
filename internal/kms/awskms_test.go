package kms_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/config"
	"github.com/vcon-server/vcon-server/internal/kms"
	"github.com/vcon-server/vcon-server/test/kit/kmstest"
)

func newWrapper(t testing.TB, cfg *config.KMS) kms.Wrapper {
	t.Helper()
	w, err := kms.New(cfg)
	if err != nil {
		t.Fatalf("kms.New: %v", err)
	}
	return w
}

// A key wrapped by local-kms through the TLS proxy comes back byte for
// byte, under the same context; the ciphertext is not the key. The
// round trip's time is logged (median of 20).
func TestAWSRoundTrip(t *testing.T) {
	ctx := context.Background()
	srv := kmstest.StartLocalKMS(t)
	w := newWrapper(t, srv.Config(""))
	if got, want := w.String(), `awskms key "`+srv.KeyID+`" in eu-west-1 at `+srv.Endpoint; got != want {
		t.Errorf("String() = %s, want %s", got, want)
	}
	roundTrips(t, w, "local-kms behind the TLS proxy", nil)

	// The largest plaintext a KMS takes, and an empty context.
	big := randomBytes(t, kms.MaxPlaintext)
	wrapped, err := w.Wrap(ctx, big, nil)
	if err != nil {
		t.Fatalf("wrap of %d bytes: %v", len(big), err)
	}
	got, err := w.Unwrap(ctx, wrapped, kms.Context{})
	if err != nil {
		t.Fatalf("unwrap of %d bytes: %v", len(big), err)
	}
	sameBytes(t, "unwrapped 4 KiB", got, big)
	_, err = w.Wrap(ctx, randomBytes(t, kms.MaxPlaintext+1), nil)
	wantKind(t, err, "encrypt", nil)
}

// A ciphertext opens under its own context only: another catalog id, a
// pair more, a pair less are all refused, as are a ciphertext made by
// another key and a damaged one.
func TestAWSOtherContextRefused(t *testing.T) {
	ctx := context.Background()
	srv := kmstest.StartLocalKMS(t)
	w := newWrapper(t, srv.Config(""))
	key := randomBytes(t, 32)
	wrapped, err := w.Wrap(ctx, key, masterContext)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]kms.Context{
		"another catalog": {"purpose": "master key", "catalog": "0f3a9d"},
		"a pair more":     {"purpose": "master key", "catalog": "0f3a9c", "tenant": "t"},
		"a pair less":     {"purpose": "master key"},
		"none":            nil,
	} {
		_, err := w.Unwrap(ctx, wrapped, c)
		text := wantKind(t, err, "decrypt", kms.ErrRefused)
		if !strings.Contains(text, "InvalidCiphertextException") || !strings.Contains(text, "another catalog or was altered") {
			t.Errorf("%s: %s: want InvalidCiphertextException and what it means", name, text)
		}
		noSecret(t, text, key, wrapped)
	}

	other := newWrapper(t, srv.Config(srv.CreateKey(t)))
	_, err = other.Unwrap(ctx, wrapped, masterContext)
	noSecret(t, wantKind(t, err, "decrypt", kms.ErrRefused), key, wrapped)

	damaged := append([]byte{}, wrapped...)
	damaged[len(damaged)-1] ^= 1
	_, err = w.Unwrap(ctx, damaged, masterContext)
	noSecret(t, wantKind(t, err, "decrypt", kms.ErrRefused), key, wrapped)
}

// A disabled key refuses both ways, with DisabledException named and the
// way out; enabled again, the ciphertext made before opens. A key
// scheduled for deletion refuses too, until its deletion is cancelled.
func TestAWSDisabledKeyRefusedThenEnabled(t *testing.T) {
	ctx := context.Background()
	srv := kmstest.StartLocalKMS(t)
	w := newWrapper(t, srv.Config(""))
	key := randomBytes(t, 32)
	wrapped, err := w.Wrap(ctx, key, masterContext)
	if err != nil {
		t.Fatal(err)
	}

	srv.Disable(t, srv.KeyID)
	_, err = w.Unwrap(ctx, wrapped, masterContext)
	text := wantKind(t, err, "decrypt", kms.ErrRefused)
	if !strings.Contains(text, "DisabledException") || !strings.Contains(text, "enable-key") {
		t.Errorf("%s: want DisabledException and how to enable the key", text)
	}
	_, err = w.Wrap(ctx, key, masterContext)
	wantKind(t, err, "encrypt", kms.ErrRefused)

	srv.Enable(t, srv.KeyID)
	got, err := w.Unwrap(ctx, wrapped, masterContext)
	if err != nil {
		t.Fatalf("unwrap once enabled: %v", err)
	}
	sameBytes(t, "unwrapped once enabled", got, key)

	srv.ScheduleDeletion(t, srv.KeyID)
	_, err = w.Unwrap(ctx, wrapped, masterContext)
	if text := wantKind(t, err, "decrypt", kms.ErrRefused); !strings.Contains(text, "KMSInvalidStateException") {
		t.Errorf("%s: want KMSInvalidStateException", text)
	}
	srv.CancelDeletion(t, srv.KeyID)
	srv.Enable(t, srv.KeyID)
	if _, err := w.Unwrap(ctx, wrapped, masterContext); err != nil {
		t.Fatalf("unwrap once the deletion is cancelled: %v", err)
	}

	// A key id that does not exist.
	_, err = newWrapper(t, srv.Config("2b9c2d1e-0000-4000-8000-000000000000")).Wrap(ctx, key, masterContext)
	if text := wantKind(t, err, "encrypt", kms.ErrRefused); !strings.Contains(text, "NotFoundException") {
		t.Errorf("%s: want NotFoundException", text)
	}
}

// With local-kms stopped the TLS proxy answers 502, and with nothing
// listening the connection is refused: both ErrUnreachable, naming the
// key and operation.
func TestAWSStoppedServerUnreachable(t *testing.T) {
	ctx := context.Background()
	srv := kmstest.StartLocalKMS(t)
	w := newWrapper(t, srv.Config(""))
	key := randomBytes(t, 32)
	wrapped, err := w.Wrap(ctx, key, masterContext)
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop(t)
	_, err = w.Unwrap(ctx, wrapped, masterContext)
	text := wantKind(t, err, "decrypt", kms.ErrUnreachable)
	if !strings.Contains(text, "502") || !strings.Contains(text, srv.KeyID) {
		t.Errorf("%s: want the 502 and the key", text)
	}

	cfg := srv.Config("")
	cfg.AWSKMS.Endpoint = "https://127.0.0.1:" + closedPort(t)
	_, err = newWrapper(t, cfg).Unwrap(ctx, wrapped, masterContext)
	if text := wantKind(t, err, "decrypt", kms.ErrUnreachable); !strings.Contains(text, "connection refused") {
		t.Errorf("%s: want connection refused", text)
	}
}

// The secret access key file is refused when group or others may read
// it, and the error says how to fix it; the secret never shows.
func TestAWSSecretFileRefused(t *testing.T) {
	srv := kmstest.StartLocalKMS(t)
	if err := os.Chmod(srv.SecretFile, 0o640); err != nil {
		t.Fatal(err)
	}
	_, err := kms.New(srv.Config(""))
	text := wantKind(t, err, "read secret_access_key_file", nil)
	if !strings.Contains(text, "readable by group or others (mode 0640)") || !strings.Contains(text, "chmod 0600 "+srv.SecretFile) {
		t.Errorf("%s: want the mode and the chmod", text)
	}
	secret, _ := os.ReadFile(srv.SecretFile)
	noSecret(t, text, []byte(strings.TrimSpace(string(secret))))
}

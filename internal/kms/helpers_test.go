package kms_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/kms"
)

// masterContext is the context the master key is wrapped under.
var masterContext = kms.Context{"purpose": "master key", "catalog": "0f3a9c"}

func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// wantKind fails unless err is a *kms.Error of op matching kind (nil:
// matching neither sentinel), and returns its text.
func wantKind(t testing.TB, err error, op string, kind error) string {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want a %s error (%v)", op, kind)
	}
	var ke *kms.Error
	if !errors.As(err, &ke) {
		t.Fatalf("%v: not a *kms.Error", err)
	}
	if ke.Op != op {
		t.Errorf("%v: Op %q, want %q", err, ke.Op, op)
	}
	refused, unreachable := errors.Is(err, kms.ErrRefused), errors.Is(err, kms.ErrUnreachable)
	switch {
	case kind == nil && (refused || unreachable):
		t.Errorf("%v: matches ErrRefused %v, ErrUnreachable %v, want neither", err, refused, unreachable)
	case kind == kms.ErrRefused && (!refused || unreachable):
		t.Errorf("%v: matches ErrRefused %v, ErrUnreachable %v, want ErrRefused only", err, refused, unreachable)
	case kind == kms.ErrUnreachable && (refused || !unreachable):
		t.Errorf("%v: matches ErrRefused %v, ErrUnreachable %v, want ErrUnreachable only", err, refused, unreachable)
	}
	return err.Error()
}

// noSecret fails when text holds any of secrets in a form a server or a
// program might have echoed it: raw, base64 or hex.
func noSecret(t testing.TB, text string, secrets ...[]byte) {
	t.Helper()
	for _, s := range secrets {
		for _, form := range []string{string(s), base64.StdEncoding.EncodeToString(s),
			base64.RawStdEncoding.EncodeToString(s), hex.EncodeToString(s), strings.ToUpper(hex.EncodeToString(s))} {
			if len(form) >= 4 && strings.Contains(text, form) {
				t.Errorf("the error holds a secret (%d bytes, as %q...): %s", len(s), form[:4], text)
			}
		}
	}
}

// sameBytes fails unless got is want.
func sameBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes %x, want the %d wrapped", what, len(got), got, len(want))
	}
}

// closedPort is a loopback port nothing listens on (just closed).
func closedPort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	return port
}

// roundTrips wraps and unwraps 20 fresh 32-byte keys under masterContext,
// fails unless each comes back byte for byte with no trace of it in the
// ciphertext, calls each (when not nil) with every ciphertext, and logs
// the times against where.
func roundTrips(t *testing.T, w kms.Wrapper, where string, each func(wrapped []byte)) {
	t.Helper()
	ctx := context.Background()
	var times []time.Duration
	for i := 0; i < 20; i++ {
		key := randomBytes(t, 32)
		start := time.Now()
		wrapped, err := w.Wrap(ctx, key, masterContext)
		if err != nil {
			t.Fatalf("wrap: %v", err)
		}
		got, err := w.Unwrap(ctx, wrapped, masterContext)
		if err != nil {
			t.Fatalf("unwrap: %v", err)
		}
		times = append(times, time.Since(start))
		sameBytes(t, "unwrapped", got, key)
		if each != nil {
			each(wrapped)
		}
		noSecret(t, string(wrapped), key)
	}
	slices.Sort(times)
	t.Logf("wrap+unwrap against %s: median %v, fastest %v, slowest %v (20 round trips)",
		where, times[len(times)/2], times[0], times[len(times)-1])
}

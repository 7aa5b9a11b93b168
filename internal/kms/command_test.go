package kms_test

import (
	"context"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/config"
	"github.com/vcon-server/vcon-server/internal/kms"
)

// commandKMS is provider command running this test binary as the program
// (TestMain) in mode, with args after it.
func commandKMS(t testing.TB, mode string, args ...string) kms.Wrapper {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := append([]string{exe, mode}, args...)
	return newWrapper(t, &config.KMS{Provider: "command", Command: &config.Command{Wrap: argv, Unwrap: argv}})
}

// aesKeyFile writes a fresh AES-256 key, hex, into a 0600 file.
func aesKeyFile(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hsm.key")
	if err := os.WriteFile(path, []byte(hex.EncodeToString(randomBytes(t, 32))), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A real program wraps with AES-GCM under the context it reads from
// VCON_KMS_CONTEXT: the key comes back byte for byte under the same
// context, and another context is refused (the program's exit status 2),
// with the first line of its stderr in the error. Another key file does
// not open it either.
func TestCommandRoundTrip(t *testing.T) {
	ctx := context.Background()
	w := commandKMS(t, "aesgcm", aesKeyFile(t))
	if exe, _ := os.Executable(); w.String() != "command "+exe {
		t.Errorf("String() = %s, want command %s", w, exe)
	}
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
	t.Logf("wrap+unwrap by a program (the test binary run twice): %v", time.Since(start))
	sameBytes(t, "unwrapped", got, key)
	noSecret(t, string(wrapped), key)

	_, err = w.Unwrap(ctx, wrapped, kms.Context{"purpose": "master key", "catalog": "0f3a9d"})
	text := wantKind(t, err, "unwrap", kms.ErrRefused)
	if !strings.Contains(text, "exit status 2 (refused): refused: cipher: message authentication failed") {
		t.Errorf("%s: want the exit status and the program's reason", text)
	}
	noSecret(t, text, key, wrapped)

	_, err = commandKMS(t, "aesgcm", aesKeyFile(t)).Unwrap(ctx, wrapped, masterContext)
	wantKind(t, err, "unwrap", kms.ErrRefused)
}

// Exit status 2 is ErrRefused, any other failure ErrUnreachable; only the
// first line of stderr is kept, and never when it repeats the input.
func TestCommandFailures(t *testing.T) {
	ctx := context.Background()
	key := randomBytes(t, 32)

	_, err := commandKMS(t, "refuse").Unwrap(ctx, []byte("wrapped"), masterContext)
	text := wantKind(t, err, "unwrap", kms.ErrRefused)
	if !strings.HasSuffix(text, "unwrap: exit status 2 (refused): key handle 7 is revoked") {
		t.Errorf("%s: want the exit status and stderr's first line only", text)
	}

	_, err = commandKMS(t, "fail").Wrap(ctx, key, masterContext)
	if text := wantKind(t, err, "wrap", kms.ErrUnreachable); !strings.HasSuffix(text, "wrap: exit status 1: the HSM is not answering") {
		t.Errorf("%s: want exit status 1 and the reason", text)
	}

	_, err = commandKMS(t, "leak").Wrap(ctx, key, masterContext)
	text = wantKind(t, err, "wrap", kms.ErrUnreachable)
	noSecret(t, text, key)
	if !strings.Contains(text, "left out") {
		t.Errorf("%s: want the program's message left out", text)
	}

	_, err = commandKMS(t, "flood").Wrap(ctx, key, masterContext)
	if text := wantKind(t, err, "wrap", kms.ErrUnreachable); !strings.Contains(text, "more than 64 KiB") {
		t.Errorf("%s: want the output bound named", text)
	}

	_, err = commandKMS(t, "silent").Wrap(ctx, key, masterContext)
	if text := wantKind(t, err, "wrap", kms.ErrUnreachable); !strings.Contains(text, "printed nothing") {
		t.Errorf("%s: want an empty answer named", text)
	}

	_, err = kms.New(&config.KMS{Provider: "command", Command: &config.Command{
		Wrap: []string{"/nonexistent/hsm-wrap"}, Unwrap: []string{"/nonexistent/hsm-wrap"}}})
	if text := wantKind(t, err, "start", nil); !strings.Contains(text, "/nonexistent/hsm-wrap: start: the program cannot be found") {
		t.Errorf("%s: want the missing program named", text)
	}
}

// The program sees the contract's environment only: VCON_KMS_OP,
// VCON_KMS_CONTEXT in its canonical encoding, PATH and HOME; none of the
// server's other variables; and / as its working directory.
func TestCommandEnvironment(t *testing.T) {
	t.Setenv("VCON_TEST_SERVER_SECRET", "must-not-reach-the-program")
	out, err := commandKMS(t, "env").Wrap(context.Background(), []byte("k"), kms.Context{"purpose": "master key", "catalog": "0f3a9c", "note": `"<&>"é`})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, k := range []string{"HOME", "PATH"} {
		if v, ok := os.LookupEnv(k); ok {
			want = append(want, k+"="+v)
		}
	}
	want = append(want, `VCON_KMS_CONTEXT={"catalog":"0f3a9c","note":"\"<&>\"é","purpose":"master key"}`, "VCON_KMS_OP=wrap", "wd=/")
	if got := strings.TrimSpace(string(out)); got != strings.Join(want, "\n") {
		t.Errorf("the program's environment:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

// A program that hangs is killed once Timeout has passed, and the call
// fails as ErrUnreachable, saying so.
func TestCommandHungProgramKilled(t *testing.T) {
	defer func(d time.Duration) { kms.Timeout = d }(kms.Timeout)
	kms.Timeout = 300 * time.Millisecond
	pidFile := filepath.Join(t.TempDir(), "pid")
	w := commandKMS(t, "hang", pidFile)
	start := time.Now()
	_, err := w.Wrap(context.Background(), randomBytes(t, 32), masterContext)
	took := time.Since(start)
	if text := wantKind(t, err, "wrap", kms.ErrUnreachable); !strings.Contains(text, "did not finish within 300ms and was killed") {
		t.Errorf("%s: want the timeout named", text)
	}
	if took > 3*time.Second {
		t.Errorf("the call took %v with a timeout of 300ms", took)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the program never ran: %v", err)
	}
	pid, _ := strconv.Atoi(string(b))
	p, err := os.FindProcess(pid)
	if err == nil {
		err = p.Signal(syscall.Signal(0))
	}
	if !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("the program (pid %d) is still there after the call: signal 0 = %v", pid, err)
	}
	t.Logf("a hung program killed and the call back in %v (timeout 300ms)", took)
}

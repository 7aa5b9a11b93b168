package kms

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/vcon-server/vcon-server/internal/config"
)

// command is provider command: a program wraps and another (or the same)
// unwraps, under the contract of the package comment.
type command struct {
	wrap, unwrap []string
	name         string
	key          string // a tenant's own key (ForKey), given as VCON_KMS_KEY; "" for the master key's
}

// exitRefused is the exit status by which a program says the KMS refused.
const exitRefused = 2

// maxStderr bounds what is kept of a program's stderr: its first line.
const maxStderr = 512

// waitDelay is how long a killed program's pipes are waited for: a child
// it started may hold them open after it died.
const waitDelay = time.Second

func newCommand(c *config.Command) (*command, error) {
	w := &command{wrap: c.Wrap, unwrap: c.Unwrap}
	w.name = "command " + c.Wrap[0]
	if c.Unwrap[0] != c.Wrap[0] {
		w.name += " (unwrap " + c.Unwrap[0] + ")"
	}
	for _, argv := range [][]string{c.Wrap, c.Unwrap} {
		// Checked now so that a wrong path fails at start, not as an
		// outage at the first call.
		fi, err := os.Stat(argv[0])
		switch {
		case err != nil:
			return nil, w.fail(argv[0], "start", fmt.Errorf("the program cannot be found: %w", plainPath(err)))
		case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
			return nil, w.fail(argv[0], "start", errors.New("the program is not an executable file"))
		}
	}
	return w, nil
}

func (w *command) String() string { return w.name }

func (w *command) fail(program, op string, err error) error {
	return &Error{Provider: "command", Key: program, Op: op, Err: err, name: w.name}
}

func (w *command) Wrap(ctx context.Context, plaintext []byte, c Context) ([]byte, error) {
	if err := checkPlaintext(plaintext); err != nil {
		return nil, w.fail(w.wrap[0], "wrap", err)
	}
	return w.run(ctx, w.wrap, "wrap", plaintext, c)
}

func (w *command) Unwrap(ctx context.Context, ciphertext []byte, c Context) ([]byte, error) {
	if err := checkCiphertext(ciphertext); err != nil {
		return nil, w.fail(w.unwrap[0], "unwrap", err)
	}
	return w.run(ctx, w.unwrap, "unwrap", ciphertext, c)
}

// run runs argv with input on stdin and returns its stdout.
func (w *command) run(ctx context.Context, argv []string, op string, input []byte, c Context) ([]byte, error) {
	encoded, err := canonical(c)
	if err != nil {
		return nil, w.fail(argv[0], op, err)
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	// Nothing of the server's environment but PATH and HOME: it may hold
	// credentials (AWS_SECRET_ACCESS_KEY, VAULT_TOKEN) that are none of
	// the program's business.
	cmd.Env = []string{"VCON_KMS_OP=" + op, "VCON_KMS_CONTEXT=" + string(encoded)}
	if w.key != "" {
		cmd.Env = append(cmd.Env, "VCON_KMS_KEY="+w.key)
	}
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.Dir = "/"
	cmd.Stdin = bytes.NewReader(input)
	// A program that prints past the bound is stopped there, not read on
	// until Timeout.
	stdout := &boundedBuffer{max: MaxAnswer, full: cancel}
	stderr := &boundedBuffer{max: maxStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = waitDelay
	err = cmd.Run()
	reason := firstLine(stderr.buf.Bytes(), input)
	var exit *exec.ExitError
	switch {
	case stdout.over:
		err = unreachable("the program printed more than %d KiB and was killed", MaxAnswer>>10)
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		err = unreachable("the program did not finish within %s and was killed%s", Timeout, reason)
	case err != nil && ctx.Err() != nil:
		err = unreachable("the program was stopped: %w", ctx.Err())
	case errors.As(err, &exit) && exit.ExitCode() == exitRefused:
		err = refused("exit status %d (refused)%s", exitRefused, reason)
	case errors.As(err, &exit):
		err = unreachable("%s%s", exit.ProcessState, reason)
	case errors.Is(err, exec.ErrWaitDelay):
		err = unreachable("the program exited, but a process it started kept its output open")
	case err != nil:
		err = unreachable("the program could not be run: %w", plainPath(err))
	case stdout.buf.Len() == 0:
		err = unreachable("the program exited 0 but printed nothing%s", reason)
	}
	if err != nil {
		return nil, w.fail(argv[0], op, err)
	}
	return stdout.buf.Bytes(), nil
}

// firstLine is the reason a program gave on stderr, ": <line>", or "".
func firstLine(b, input []byte) string {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	s := scrub(string(line), input)
	if s == "" {
		return ""
	}
	return ": " + s
}

// plainPath drops the operation and path of an *os.PathError, which the
// Error names already.
func plainPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// boundedBuffer keeps the first max bytes written to it and drops the
// rest, so that a program is never blocked on a full pipe; the first
// write past max calls full. It holds its bytes.Buffer rather than
// embedding it: io.Copy would take the Buffer's ReadFrom and read without
// bound.
type boundedBuffer struct {
	buf  bytes.Buffer
	max  int
	full func()
	over bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); len(p) > room {
		b.buf.Write(p[:max(room, 0)])
		if !b.over && b.full != nil {
			b.full()
		}
		b.over = true
		return len(p), nil
	}
	return b.buf.Write(p)
}

package docrun

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Shell is one bash session. Blocks are sourced into it one after the
// other, so variables, functions and the working directory carry over
// from one block to the next, as they do for a reader pasting them into
// one terminal.
type Shell struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	dir   string // where block files are written

	mu     sync.Mutex
	out    bytes.Buffer // stdout and stderr, interleaved as printed
	wake   chan struct{}
	exited chan struct{}
	n      int
}

// StartShell starts bash in dir with env. Its standard output and error
// are one pipe, so the runner sees them in the order they were printed.
func StartShell(dir string, env []string, blockDir string) (*Shell, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = w, w
	// Its own process group: Close ends the servers a page started in
	// the background too, and nothing else.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	w.Close()
	s := &Shell{cmd: cmd, stdin: stdin, dir: blockDir, wake: make(chan struct{}, 1), exited: make(chan struct{})}
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			s.mu.Lock()
			s.out.Write(buf[:n])
			s.mu.Unlock()
			select {
			case s.wake <- struct{}{}:
			default:
			}
			if err != nil {
				r.Close()
				return
			}
		}
	}()
	go func() { cmd.Wait(); close(s.exited) }()
	return s, nil
}

// ErrTimeout is returned by Run when a block runs longer than allowed.
var ErrTimeout = errors.New("the block did not finish in time")

// Run sources text in the session and returns what it printed and the
// exit status of its last command. Standard input is /dev/null: a block
// that reads it must say so with a heredoc.
func (s *Shell) Run(ctx context.Context, text string) (string, int, error) {
	s.n++
	file := filepath.Join(s.dir, fmt.Sprintf("block-%03d.sh", s.n))
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		return "", 0, err
	}
	var nonce [8]byte
	rand.Read(nonce[:])
	mark := "__docrun_done_" + hex.EncodeToString(nonce[:]) + " "
	s.mu.Lock()
	s.out.Reset()
	s.mu.Unlock()
	// The mark is printed by the session itself after the block, on the
	// same pipe, so everything the block printed comes before it.
	line := fmt.Sprintf("source %s </dev/null; printf '%%s%%d\\n' '%s' \"$?\"\n", shellQuote(file), mark)
	if _, err := io.WriteString(s.stdin, line); err != nil {
		return "", 0, fmt.Errorf("the shell session ended: %w", err)
	}
	for {
		s.mu.Lock()
		got := s.out.String()
		s.mu.Unlock()
		if i := strings.Index(got, mark); i >= 0 {
			rest := got[i+len(mark):]
			if j := strings.IndexByte(rest, '\n'); j >= 0 {
				code, _ := strconv.Atoi(rest[:j])
				return got[:i], code, nil
			}
		}
		select {
		case <-s.wake:
		case <-s.exited:
			time.Sleep(50 * time.Millisecond) // let the reader drain
			s.mu.Lock()
			got = s.out.String()
			s.mu.Unlock()
			return got, -1, errors.New("the shell session ended (a block ran exit?)")
		case <-ctx.Done():
			s.mu.Lock()
			got = s.out.String()
			s.mu.Unlock()
			return got, -1, ErrTimeout
		}
	}
}

// Close ends the session and every process it started that is still in
// its process group (servers started by the systemctl stand-in): SIGTERM
// first, so a server stops as systemd would stop it, then SIGKILL.
func (s *Shell) Close() {
	s.stdin.Close()
	pgid := s.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	for i := 0; i < 100 && syscall.Kill(-pgid, 0) == nil; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	<-s.exited
}

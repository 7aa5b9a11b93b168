package testenv

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/freeport"
)

// FreePort returns a loopback address no one listens on right now.
func FreePort(t interface{ Fatal(...any) }) string {
	p, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
}

// Proc is the real binary serving, as a separate process that a test can
// kill as a power cut would.
type Proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has ended
	Log  string
	// Profile is the CPU profile the process writes when it stops, ""
	// when it writes none (StartProfiled).
	Profile string
}

// StartBinary runs `vcon-server serve` on the Env's configuration (whose
// Options.Listen must be a fixed port) with extra environment variables,
// and waits until /health answers. It returns nil when the process exited
// before answering.
func (e *Env) StartBinary(env ...string) *Proc {
	e.T.Helper()
	return e.startBinaryAt(Binary(e.T), env...)
}

// StartBinaryAt is StartBinary with another build of vcon-server, at bin.
func (e *Env) StartBinaryAt(bin string) *Proc {
	e.T.Helper()
	return e.startBinaryAt(bin)
}

func (e *Env) startBinaryAt(bin string, env ...string) *Proc {
	e.T.Helper()
	p := &Proc{done: make(chan struct{}), Log: filepath.Join(e.Dir, "serve.log")}
	logf, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		e.T.Fatal(err)
	}
	p.cmd = exec.Command(bin, "serve", "--config", e.ConfigPath)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		e.T.Fatal(err)
	}
	go func() { p.cmd.Wait(); logf.Close(); close(p.done) }()
	e.T.Cleanup(func() { p.Kill() })
	e.BaseURL = "https://" + e.Config.Listen
	e.Client = e.HTTPClient()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			b, _ := os.ReadFile(p.Log)
			e.T.Fatalf("vcon-server serve exited at start:\n%s", b)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", e.BaseURL+"/health", nil)
		resp, err := e.Client.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			return p
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(p.Log)
	e.T.Fatalf("vcon-server serve did not answer in 60 s:\n%s", b)
	return nil
}

// Kill sends SIGKILL and waits for the process to end.
func (p *Proc) Kill() {
	if !p.Exited() {
		p.cmd.Process.Signal(syscall.SIGKILL)
	}
	p.Wait()
}

// Stop sends SIGTERM (a graceful stop) and waits.
func (p *Proc) Stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.Wait()
}

// Wait waits for the process to end, however it ends, for up to a minute.
func (p *Proc) Wait() {
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

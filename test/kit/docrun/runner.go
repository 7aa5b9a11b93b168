package docrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/freeport"
)

// Options say what a page's scratch environment is made of.
type Options struct {
	Binary string // the vcon-server program under test
	Module string // the checkout, which `git clone` of the project clones
	DuckDB string // a duckdb program for pages that use one, or ""
	// Programs are other tools a page runs, by name, linked into the
	// session's PATH (the MCP Inspector).
	Programs  map[string]string
	Versitygw string // versitygw, for pages that use objects.example.com
	// KMS is the key service pages reach as kms.example.com:4443, for
	// pages that name it.
	KMS *KMS
	// Timeout bounds each block (5 minutes when zero).
	Timeout time.Duration
	// Env is added to the session's environment (build caches and the
	// like), after the runner's own variables.
	Env []string
}

// Env is one page's scratch host: a root holding the host paths pages
// write (etc/vcon-server, var/lib/vcon-server, ...), a home folder where
// the session starts, the stand-ins, and an S3 service when needed.
type Env struct {
	Root string
	Home string
	Rewriter
	opt   Options
	shell *Shell
	s3    *S3
	has   map[string]bool // vcon-server commands found
}

// NewEnv makes the scratch host in dir (an empty folder) and starts its
// shell. withS3 starts versitygw for objects.example.com:9000 and gives
// the home folder the files a storage operator would hand over: s3.secret
// (the secret key of the access key "vcon-server") and s3-ca.pem.
func NewEnv(dir string, opt Options, withS3 bool) (_ *Env, err error) {
	if opt.Timeout == 0 {
		opt.Timeout = 5 * time.Minute
	}
	root := filepath.Join(dir, "root")
	e := &Env{Root: root, Home: filepath.Join(root, "home", "operator"), opt: opt, has: map[string]bool{}}
	defer func() {
		if err != nil {
			e.Close() // versitygw, when it was started
		}
	}()
	e.Rewriter.Root = root
	bin := filepath.Join(root, "docs-bin") // stand-ins, first on PATH
	// The folders every Debian host has, that pages install into.
	dirs := []string{"etc/systemd/system", "usr/local/bin", "usr/local/share", "var/lib", "var/backups", "var/log", "run", "blocks"}
	for _, d := range append(dirs, "docs-bin", "home/operator") {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.Symlink(opt.Binary, filepath.Join(root, "usr/local/bin/vcon-server")); err != nil {
		return nil, err
	}
	if opt.DuckDB != "" {
		if err := os.Symlink(opt.DuckDB, filepath.Join(bin, "duckdb")); err != nil {
			return nil, err
		}
	}
	for name, p := range opt.Programs {
		if err := os.Symlink(p, filepath.Join(bin, name)); err != nil {
			return nil, err
		}
	}
	git, _ := exec.LookPath("git")
	if err := writeStandIns(bin, root, opt.Module, git); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	e.Port = port
	if withS3 {
		if opt.Versitygw == "" {
			return nil, errors.New("the page uses objects.example.com and no versitygw was given")
		}
		sdir := filepath.Join(dir, "s3")
		if err := os.MkdirAll(sdir, 0o700); err != nil {
			return nil, err
		}
		if e.s3, err = StartS3(opt.Versitygw, sdir); err != nil {
			return nil, err
		}
		e.S3Port = e.s3.Port
		if err := os.WriteFile(filepath.Join(e.Home, "s3.secret"), []byte(e.s3.SecretKey+"\n"), 0o600); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(e.Home, "s3-ca.pem"), e.s3.CAPEM, 0o644); err != nil {
			return nil, err
		}
	}
	if opt.KMS != nil {
		if err := e.handOverKMS(opt.KMS); err != nil {
			return nil, err
		}
	}
	env := []string{
		"HOME=" + e.Home,
		"PATH=" + bin + ":" + filepath.Join(root, "usr/local/bin") + ":" + os.Getenv("PATH"),
		"USER=operator", "LOGNAME=operator",
		"SHELL=/bin/bash", "TERM=dumb",
		"LC_ALL=C", "TZ=UTC",
		"DOCS_ROOT=" + root,
	}
	if ci := os.Getenv("CI"); ci != "" {
		env = append(env, "CI="+ci)
	}
	env = append(env, opt.Env...)
	if e.shell, err = StartShell(e.Home, env, filepath.Join(root, "blocks")); err != nil {
		return nil, err
	}
	return e, nil
}

// Close stops the server the page started, the session and versitygw.
func (e *Env) Close() {
	if e.shell != nil {
		// As systemd would at shutdown: a graceful stop first.
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		e.shell.Run(ctx, "systemctl stop vcon-server >/dev/null 2>&1\n")
		cancel()
		e.shell.Close()
	}
	if e.s3 != nil {
		e.s3.Stop()
	}
}

// Journal is what the server printed, as journalctl would show it.
func (e *Env) Journal() string {
	b, _ := os.ReadFile(filepath.Join(e.Root, "run", "vcon-server.journal"))
	return e.Output(string(b))
}

// Failure is a block whose output differs from its page, or that did not
// finish. Its message names the page and line, shows the block, and
// shows the difference.
type Failure struct {
	Block  *Block
	Reason string
	Diff   string
	Status int
	Tail   string // the end of the server's log, for context
}

func (f *Failure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d: %s\n", f.Block.Page, f.Block.Line, f.Reason)
	b.WriteString("the block:\n")
	for _, l := range splitLines(f.Block.Command) {
		b.WriteString("    " + l + "\n")
	}
	if f.Diff != "" {
		if f.Block.HasOutput {
			fmt.Fprintf(&b, "--- shown in the page (line %d)\n+++ printed (exit status %d)\n", f.Block.OutputLine, f.Status)
		} else {
			fmt.Fprintf(&b, "--- shown in the page: nothing (no ```text block follows)\n+++ printed (exit status %d)\n", f.Status)
		}
		b.WriteString(f.Diff)
	}
	if f.Tail != "" {
		b.WriteString("the server's log ends with:\n" + f.Tail)
	}
	return b.String()
}

// RunPage runs a page's blocks in the session, in order, and stops at the
// first that fails. note is told of every block not run, and why.
func (e *Env) RunPage(ctx context.Context, p *Page, note func(string)) error {
	for i, b := range p.Blocks {
		if b.Skip != "" {
			note(fmt.Sprintf("%s:%d: NOT RUN, as the page asks: %s", p.Name, b.Line, b.Skip))
			continue
		}
		if missing := e.missingCommand(b.Needs); missing != "" {
			note(fmt.Sprintf("%s:%d: NOT RUN: vcon-server has no %q command yet (the section is marked needs-command)", p.Name, b.Line, missing))
			continue
		}
		if err := e.RunBlock(ctx, b); err != nil {
			if left := len(p.Blocks) - i - 1; left > 0 {
				note(fmt.Sprintf("%s: the %d block(s) after line %d were not run", p.Name, left, b.Line))
			}
			return err
		}
	}
	return nil
}

// RunBlock runs one block and compares its output with the page's.
func (e *Env) RunBlock(ctx context.Context, b *Block) error {
	ctx, cancel := context.WithTimeout(ctx, e.opt.Timeout)
	defer cancel()
	out, status, err := e.shell.Run(ctx, e.Block(b.Command))
	got := e.Output(out)
	if err != nil {
		reason := err.Error()
		if errors.Is(err, ErrTimeout) {
			reason = fmt.Sprintf("the block did not finish in %s", e.opt.Timeout)
		}
		return &Failure{Block: b, Reason: reason, Diff: prefixLines("+", got), Status: status, Tail: e.journalTail()}
	}
	if d := Diff(b.Output, got); d != "" {
		return &Failure{Block: b, Reason: "the output differs from the page", Diff: d, Status: status, Tail: e.journalTail()}
	}
	return nil
}

func (e *Env) journalTail() string {
	lines := splitLines(e.Journal())
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	if len(lines) == 0 {
		return ""
	}
	return prefixLines("    ", strings.Join(lines, "\n"))
}

func prefixLines(prefix, s string) string {
	var b strings.Builder
	for _, l := range splitLines(s) {
		b.WriteString(prefix + l + "\n")
	}
	return b.String()
}

// missingCommand returns the first of cmds the binary does not have.
func (e *Env) missingCommand(cmds []string) string {
	for _, c := range cmds {
		ok, seen := e.has[c]
		if !seen {
			args := append(strings.Fields(c), "--help")
			ok = exec.Command(e.opt.Binary, args...).Run() == nil
			e.has[c] = ok
		}
		if !ok {
			return c
		}
	}
	return ""
}

// toolWords are the host programs a page may run that the runner does
// not stand in for; a page that uses one needs it installed.
var toolWords = []string{"jq", "curl", "openssl", "make", "go", "sqlite3", "duckdb", "sha256sum", "cmp", "timeout", "python3", "mcp-inspector"}

// Tools lists the host programs the page's blocks run, of toolWords.
func (p *Page) Tools() []string {
	var out []string
	for _, w := range toolWords {
		re := regexp.MustCompile(`(^|[\s|;&(` + "`" + `])` + regexp.QuoteMeta(w) + `(\s|$)`)
		for _, b := range p.Blocks {
			if b.Skip == "" && re.MatchString(b.Command) {
				out = append(out, w)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

func freePort() (int, error) { return freeport.Port() }

// The documentation runner: every page of docs/ is run as a test, each in
// a scratch host of its own. docs/README.md says how pages are written for
// it; internal/docrun does the work. In short:
//
//   - A ```sh block is run; the ```text block after it (before any other
//     fenced block) is what it must print, stdout and stderr together, with
//     placeholders such as <tenant id> or <time> for what changes at each
//     run. A block with no ```text block must print nothing.
//   - A page's blocks run in order in ONE bash session, so variables and
//     the working directory carry over. `<!-- docs-test: after x.md -->`
//     runs x.md's blocks first in the same session (getting-started.md
//     makes the tenant and keys the other pages use).
//   - Host paths (/etc/vcon-server, /var/lib/vcon-server,
//     /usr/local/share/vcon-server, /usr/local/bin, /etc/systemd/system...)
//     are rewritten to a scratch root before a block runs, and back in what
//     it prints. vcon.example.com:8443 and objects.example.com:9000 are
//     rewritten to localhost on the ports of the page's own server and of
//     a versitygw the runner starts. sudo, systemctl, journalctl, install
//     (without -o/-g), useradd, chown and `git clone` of the project are
//     stand-ins that act on the scratch root only.
//   - A missing host tool (jq, curl, openssl, versitygw, duckdb...) fails
//     the test in CI (CI=true) and skips it, loudly, elsewhere.
package docs_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/docrun"
	"github.com/vcon-server/vcon-server/test/kit/duckdbtest"
	"github.com/vcon-server/vcon-server/test/kit/kmstest"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
	"github.com/vcon-server/vcon-server/test/kit/toolbin"
)

// TestDocs runs every page of docs/, each page in parallel with the others.
func TestDocs(t *testing.T) {
	paths, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string]*docrun.Page{}
	for _, path := range paths {
		p, err := docrun.ParseFile(path)
		if err != nil {
			t.Fatal(err)
		}
		pages[p.Name] = p
	}
	if len(pages) == 0 {
		t.Fatal("no pages in docs/")
	}
	for _, path := range paths {
		p := pages[filepath.Base(path)]
		if len(p.Blocks) == 0 {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			runPage(t, p, pages)
		})
	}
}

// chain is the pages to run for p: the pages it comes after (and theirs),
// each once, then p.
func chain(t *testing.T, p *docrun.Page, pages map[string]*docrun.Page) []*docrun.Page {
	var out []*docrun.Page
	seen := map[string]bool{}
	var visit func(p *docrun.Page, path []string)
	visit = func(p *docrun.Page, path []string) {
		for _, name := range p.After {
			if slices.Contains(path, name) {
				t.Fatalf("%s: the pages come after each other in a loop: %s %s", p.Name, strings.Join(path, " → "), name)
			}
			q := pages[name]
			if q == nil {
				t.Fatalf("%s: comes after %s, which is not a page of docs/", p.Name, name)
			}
			visit(q, append(path, name))
		}
		if !seen[p.Name] {
			seen[p.Name] = true
			out = append(out, p)
		}
	}
	visit(p, []string{p.Name})
	return out
}

func runPage(t *testing.T, p *docrun.Page, pages map[string]*docrun.Page) {
	run := chain(t, p, pages)
	opt := options(t)
	server, withKMS := false, false
	tools := map[string]bool{}
	for _, q := range run {
		server = server || q.Server
		withKMS = withKMS || q.KMS
		for _, tool := range q.Tools() {
			tools[tool] = true
		}
	}
	for tool := range tools {
		switch tool {
		case "duckdb":
			opt.DuckDB = duckdbtest.Path(t) // skips or fails, loudly, without one
		case "mcp-inspector":
			// scripts/install-mcp-client.sh puts it beside the other tools.
			path := toolbin.Find(tool, "")
			if path == "" {
				need(t, p.Name+" runs mcp-inspector, which is not installed: scripts/install-mcp-client.sh installs it")
			}
			opt.Programs = map[string]string{tool: path}
		default:
			if _, err := exec.LookPath(tool); err != nil {
				need(t, p.Name+" runs "+tool+", which is not installed")
			}
		}
	}
	if server {
		if opt.Versitygw = s3test.Binary("versitygw"); opt.Versitygw == "" {
			need(t, p.Name+" uses an S3 service, and there is no versitygw: run scripts/install-test-tools.sh versitygw")
		}
	}
	if withKMS {
		opt.KMS = handOverKMS(t) // skips or fails, loudly, without local-kms
	}
	env, err := docrun.NewEnv(t.TempDir(), opt, server)
	if err != nil {
		t.Fatalf("%s: the scratch host: %v", p.Name, err)
	}
	defer env.Close()
	ctx := context.Background()
	for _, q := range run {
		err := env.RunPage(ctx, q, func(s string) { t.Log(s) })
		if err != nil {
			if q != p {
				t.Fatalf("%s comes after %s, which failed:\n%v", p.Name, q.Name, err)
			}
			t.Fatal(err)
		}
	}
}

// handOverKMS starts the key service a page reaches as kms.example.com:
// local-kms, which speaks AWS KMS's API, with a key made for the page and
// one for a tenant's own.
func handOverKMS(t *testing.T) *docrun.KMS {
	a := kmstest.StartLocalKMS(t)
	secret, err := os.ReadFile(a.SecretFile)
	if err != nil {
		t.Fatal(err)
	}
	return &docrun.KMS{Endpoint: a.Endpoint, CAPEM: a.CAPEM, Region: a.Region, AccessKeyID: a.AccessKeyID,
		Secret: strings.TrimSpace(string(secret)), KeyID: a.KeyID, TenantKeyID: a.CreateKey(t)}
}

// need fails the test in CI, where every page must run, and skips it
// loudly elsewhere.
func need(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip("SKIPPED, NOT RUN: " + msg)
}

var (
	goEnvOnce sync.Once
	goEnv     []string
)

// options are what every page's scratch host shares: the binary under
// test, and the Go build caches of this machine, so that a page building
// the project (install.md) does not build it cold in its scratch home.
func options(t *testing.T) docrun.Options {
	goEnvOnce.Do(func() {
		vars := []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOPROXY", "GOSUMDB", "GOFLAGS", "GONOSUMDB", "GOPRIVATE", "GONOPROXY"}
		out, err := exec.Command("go", append([]string{"env"}, vars...)...).Output()
		if err != nil {
			return
		}
		for i, v := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
			if i < len(vars) && v != "" {
				goEnv = append(goEnv, vars[i]+"="+v)
			}
		}
		goEnv = append(goEnv, "GOTOOLCHAIN=local")
	})
	return docrun.Options{
		Binary:  testenv.Binary(t),
		Module:  testenv.ModuleRoot(t),
		Timeout: 10 * time.Minute, // install.md builds the release cold on a new machine
		Env:     goEnv,
	}
}

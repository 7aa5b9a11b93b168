package docs_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/test/kit/docrun"
)

// runFixture runs one page of testdata/ in a scratch host and returns the
// runner's verdict and its notes.
func runFixture(t *testing.T, name string) (error, []string) {
	t.Helper()
	p, err := docrun.ParseFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	env, err := docrun.NewEnv(t.TempDir(), options(t), false)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	var notes []string
	err = env.RunPage(context.Background(), p, func(s string) { notes = append(notes, s) })
	return err, notes
}

// TestRunnerReportsDrift: a page whose shown output differs from what its
// command prints fails, with a diff that names the page and the line.
func TestRunnerReportsDrift(t *testing.T) {
	err, _ := runFixture(t, "drift.md")
	var f *docrun.Failure
	if !errors.As(err, &f) {
		t.Fatalf("the drifted page passed (err %v)", err)
	}
	msg := err.Error()
	for _, want := range []string{
		"drift.md:6: the output differs from the page",
		"    echo \"$GREETING\"",
		"--- shown in the page (line 12)",
		"-hello, world\n",
		"+hello, docs\n",
		" second line\n",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the failure does not say %q:\n%s", want, msg)
		}
	}
	t.Logf("the failure reads:\n%s", msg)
}

// TestRunnerConventions: state carries over, placeholders and ellipses
// match, host paths and names read back as written, skips are reported.
func TestRunnerConventions(t *testing.T) {
	err, notes := runFixture(t, "conventions.md")
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(notes, "\n")
	for _, want := range []string{"NOT RUN, as the page asks: it needs a real host", `NOT RUN: vcon-server has no "no-such-command" command yet`} {
		if !strings.Contains(all, want) {
			t.Errorf("no note %q in:\n%s", want, all)
		}
	}
}

func TestPlaceholders(t *testing.T) {
	for _, tt := range []struct {
		shown, got string
		ok         bool
	}{
		{"{\"id\":\"<tenant id>\"}", "{\"id\":\"0b6f7a48-3c1e-4d8a-9f55-2d2a7c1e9b10\"}", true},
		{"{\"id\":\"<tenant id>\"}", "{\"id\":\"0B6F7A48-3c1e-4d8a-9f55-2d2a7c1e9b10\"}", false},
		{"{\"id\":\"<tenant id>\"}", "{\"id\":\"acme\"}", false},
		{"tenants/<tenant id>/parquet/date=<yyyy-mm-dd>/part-<file id>.parquet",
			"tenants/0b6f7a48-3c1e-4d8a-9f55-2d2a7c1e9b10/parquet/date=2026-11-30/part-0123456789abcdef0123456789abcdef.parquet", true},
		{"<time>  INFO vcon_server::serve: listening", "2026-11-30T11:33:00Z  INFO vcon_server::serve: listening", true},
		{"<time>", "2026-11-30T11:33:00.123456789Z", true},
		{"<time>", "yesterday", false},
		{"v1.5.6 <words>", "v1.5.6 (Variegata) 1234abcd", true},
		{"{\"token\":\"<token>\"}", "{\"token\":\"vcs_0123456789abcdef_" + strings.Repeat("A", 43) + "\"}", true},
		{"<key id>", "0123456789abcdef", true},
		{"<key id>", "0123456789abcde", false},
		{"<sha256>  vcon-server-linux-amd64", strings.Repeat("ab", 32) + "  vcon-server-linux-amd64", true},
		{"a\n...\nz", "a\nb\nc\nz", true},
		{"a\n...\nz", "a\nz", true},
		{"a\n...\nz", "a\nb", false},
		{"a.b", "axb", false}, // literal text is literal
		{"", "", true},
		{"", "something", false},
		{"one\n", "one", true}, // a trailing newline is not compared
	} {
		if got := docrun.Match(tt.shown, tt.got); got != tt.ok {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.shown, tt.got, got, tt.ok)
		}
	}
	d := docrun.Diff("a\n<n>\nc", "a\nx\nc")
	if want := " a\n-<n>\n+x\n c\n"; d != want {
		t.Errorf("diff:\n%s\nwant:\n%s", d, want)
	}
}

// TestUnitFileInGettingStarted: getting-started.md shows the systemd unit
// in full, and it is dist/vcon-server.service, byte for byte.
func TestUnitFileInGettingStarted(t *testing.T) {
	page, err := os.ReadFile("getting-started.md")
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile("../dist/vcon-server.service")
	if err != nil {
		t.Fatal(err)
	}
	const start = "cat > vcon-server.service <<'EOF'\n"
	i := strings.Index(string(page), start)
	if i < 0 {
		t.Fatalf("getting-started.md does not write the unit with %q", start)
	}
	rest := string(page)[i+len(start):]
	j := strings.Index(rest, "\nEOF\n")
	if j < 0 {
		t.Fatal("the unit's heredoc in getting-started.md does not end")
	}
	if shown := rest[:j+1]; shown != string(unit) {
		t.Errorf("getting-started.md shows another unit than dist/vcon-server.service:\n%s", docrun.Diff(string(unit), shown))
	}
}

// TestRewriter: host paths and names go to the scratch host before a block
// runs, and come back in what it printed; what is not a host path stays.
func TestRewriter(t *testing.T) {
	r := docrun.Rewriter{Root: "/tmp/x/root", Port: 41000, S3Port: 42000}
	for _, tt := range []struct{ page, run string }{
		{"--config /etc/vcon-server/vcon-server.toml", "--config /tmp/x/root/etc/vcon-server/vcon-server.toml"},
		{`data_dir = "/var/lib/vcon-server"`, `data_dir = "/tmp/x/root/var/lib/vcon-server"`},
		{"--cacert /usr/local/share/vcon-server/ca.pem https://vcon.example.com:8443/health", "--cacert /tmp/x/root/usr/local/share/vcon-server/ca.pem https://localhost:41000/health"},
		{`endpoint = "https://objects.example.com:9000"`, `endpoint = "https://localhost:42000"`},
		{`listen = "0.0.0.0:8443"`, `listen = "0.0.0.0:41000"`},
		{"--data-binary @/etc/vcon-server/x", "--data-binary @/tmp/x/root/etc/vcon-server/x"},
		{"cat /proc/sys/kernel/random/uuid", "cat /proc/sys/kernel/random/uuid"},
		{"s3://vcon/var/lib/vcon-server/x", "s3://vcon/var/lib/vcon-server/x"},
		{"/etc/vcon-serverx", "/etc/vcon-serverx"},
	} {
		if got := r.Block(tt.page); got != tt.run {
			t.Errorf("Block(%q) = %q, want %q", tt.page, got, tt.run)
		}
	}
	for _, tt := range []struct{ printed, page string }{
		{"/tmp/x/root/var/lib/vcon-server/catalog.db", "/var/lib/vcon-server/catalog.db"},
		{"listening address=[::]:41000", "listening address=[::]:8443"},
		{"https://localhost:41000/vcons", "https://vcon.example.com:8443/vcons"},
		{"https://localhost:42000/vcon", "https://objects.example.com:9000/vcon"},
	} {
		if got := r.Output(tt.printed); got != tt.page {
			t.Errorf("Output(%q) = %q, want %q", tt.printed, got, tt.page)
		}
	}
}

// TestLinks: every relative link of the pages and the README names a file
// that exists.
func TestLinks(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)\s]*)?\)`)
	pages, _ := filepath.Glob("*.md")
	pages = append(pages, "../README.md")
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(page), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", page, target)
			}
		}
	}
}

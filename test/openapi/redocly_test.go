package openapi

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/test/kit/openapitest"
)

// envRedocly names the environment variable that, when set, gives the
// redocly program to run instead of the one scripts/install-redocly.sh
// installs.
const envRedocly = "VCON_TEST_REDOCLY"

// redocly is the linter's program: $VCON_TEST_REDOCLY, or the wrapper in
// $VCON_TOOLS/bin (by default ~/.cache/vcon-server/tools/bin). Without
// one the test is skipped, loudly, or fails when CI is "true", so that CI
// never passes by skipping the lint.
func redocly(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(envRedocly); p != "" {
		return p
	}
	tools := os.Getenv("VCON_TOOLS")
	if tools == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		tools = filepath.Join(home, ".cache", "vcon-server", "tools")
	}
	p := filepath.Join(tools, "bin", "redocly")
	if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0 {
		return p
	}
	msg := "Redocly's linter is needed: no " + p + "; install it with scripts/install-redocly.sh (npm, about 15 MB, outside the repository), or set " + envRedocly
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip("SKIPPED, NOT RUN: " + msg)
	return ""
}

// TestRedoclyLint: redocly lint, with its recommended rules and no
// configuration file (so that no rule is turned off), finds no error and
// no warning in docs/openapi.json.
func TestRedoclyLint(t *testing.T) {
	bin := redocly(t)
	doc, err := filepath.Abs(openapitest.Path(t))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "lint", "--extends", "recommended", "--format", "json", "--max-problems", "1000", doc)
	// An empty folder: no redocly.yaml to find, whatever the checkout has.
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s: %v\n%s", bin, err, stderr.String())
	}
	var report struct {
		Totals struct {
			Errors, Warnings int
		}
		Version  string
		Problems []struct {
			RuleID, Severity, Message string
			Location                  []struct{ Pointer string }
		}
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("redocly lint's report is not JSON (%v):\n%s\n%s", err, out, stderr.String())
	}
	if report.Version != "2.77.0" {
		t.Errorf("redocly %s, want 2.77.0 (scripts/redocly/package-lock.json)", report.Version)
	}
	for _, p := range report.Problems {
		where := ""
		if len(p.Location) > 0 {
			where = p.Location[0].Pointer
		}
		t.Errorf("docs/openapi.json%s: %s (%s, %s)", where, p.Message, p.Severity, p.RuleID)
	}
	if report.Totals.Errors != 0 || report.Totals.Warnings != 0 || err != nil {
		t.Errorf("redocly lint: %d errors, %d warnings, %v", report.Totals.Errors, report.Totals.Warnings, err)
	}
}

package e2e

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestMakeRun runs scripts/run-local.sh (make run) in a copy of the
// repository's layout, then the commands it prints, as a new user would:
// they store a vCon and read it back, and neither the script nor they
// write anything in the repository but .local/.
func TestMakeRun(t *testing.T) {
	for _, tool := range []string{"bash", "jq", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is needed: %v", tool, err)
			}
			t.Skipf("SKIPPED, NOT RUN: %s is needed: %v", tool, err)
		}
	}
	root := t.TempDir()
	for src, dst := range map[string]string{
		filepath.Join(testenv.ModuleRoot(t), "scripts", "run-local.sh"): filepath.Join(root, "scripts", "run-local.sh"),
		testenv.Binary(t): filepath.Join(root, "bin", "vcon-server"),
	} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	before := entries(t, root)

	addr := testenv.FreePort(t)
	_, port, _ := net.SplitHostPort(addr)
	run := exec.Command(filepath.Join(root, "scripts", "run-local.sh"))
	run.Env = append(os.Environ(), "VCON_PORT="+port)
	var stderr strings.Builder
	run.Stderr = &stderr
	out, err := run.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		run.Process.Kill()
		run.Wait()
	}()

	// The commands are the lines between "In another shell" and "Stop it".
	printed := make(chan []string, 1)
	go func() {
		var cmds []string
		in := false
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "In another shell"):
				in = true
			case strings.HasPrefix(line, "Stop it"):
				printed <- cmds
				return
			case in && strings.TrimSpace(line) != "":
				cmds = append(cmds, strings.TrimSpace(line))
			}
		}
		printed <- nil
	}()
	var cmds []string
	select {
	case cmds = <-printed:
	case <-time.After(60 * time.Second):
		t.Fatalf("make run printed no commands within 60 s: %s", stderr.String())
	}
	if len(cmds) == 0 {
		t.Fatalf("make run printed no commands: %s", stderr.String())
	}
	waitListening(t, addr)

	sh := exec.Command("bash", "-euo", "pipefail", "-c", strings.Join(cmds, "\n"))
	sh.Dir = t.TempDir() // the commands go to the repository themselves
	got, err := sh.CombinedOutput()
	if err != nil || !strings.Contains(string(got), `"stored_at"`) || !strings.Contains(string(got), `"subject":"Hello"`) {
		t.Fatalf("the printed commands: %v\n%s\n%s", err, strings.Join(cmds, "\n"), got)
	}

	after := entries(t, root)
	if i := slices.Index(after, ".local"); i >= 0 {
		after = slices.Delete(after, i, i+1)
	}
	if !slices.Equal(after, before) {
		t.Errorf("make run wrote in the repository outside .local/: %v, was %v", after, before)
	}
}

// entries lists what dir holds, its folders' files included but .local's.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		out = append(out, rel)
		if rel == ".local" {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitListening waits for a listener at addr.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens at %s after 30 s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

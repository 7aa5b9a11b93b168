package e2e

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestReleaseCheck runs scripts/release-check.sh, which builds the release
// twice (two source paths, the second with an empty build cache) and
// compares SHA256SUMS, then reads the ELF of each binary itself: no
// program interpreter, no dynamic section needing a library. It takes a
// few minutes (two cold builds of two architectures), so it runs only
// when VCON_RELEASE_CHECK=1: `make release-check`, which CI runs.
func TestReleaseCheck(t *testing.T) {
	if os.Getenv("VCON_RELEASE_CHECK") != "1" {
		t.Skip("NOT RUN: TestReleaseCheck builds the release twice (a few minutes); make release-check runs it (CI does)")
	}
	for _, tool := range []string{"git", "make", "go", "tar", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the release check needs %s on PATH", tool)
		}
	}
	root := testenv.ModuleRoot(t)
	work := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "scripts", "release-check.sh"), work)
	cmd.Env = append(os.Environ(), "VERSION=v0.0.0-releasecheck")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("release-check.sh: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "release-check: ok: v0.0.0-releasecheck, two builds identical, static, stamped") {
		t.Fatalf("release-check.sh did not report success:\n%s", out)
	}
	t.Logf("release-check.sh in %v:\n%s", time.Since(start).Round(time.Second), out)
	for _, arch := range []string{"amd64", "arm64"} {
		for _, build := range []string{"a", "b"} {
			path := filepath.Join(work, build, "vcon-server-linux-"+arch)
			f, err := elf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
					t.Errorf("%s has a %v program header: not a static binary", path, p.Type)
				}
			}
			if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
				t.Errorf("%s needs shared libraries %v (%v)", path, libs, err)
			}
			want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
			if f.Machine != want || f.Class != elf.ELFCLASS64 {
				t.Errorf("%s is for %v %v, want %v", path, f.Machine, f.Class, want)
			}
			f.Close()
		}
	}
}

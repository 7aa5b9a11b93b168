// Package smalldisk gives a test a file system of its own, small enough to
// fill: a tmpfs mounted for the test and unmounted after it. Mounting needs
// root, which CI has; elsewhere the test is skipped, loudly.
package smalldisk

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// New returns a new folder on a file system of size (a tmpfs size, "48m").
func New(t testing.TB, size string) string {
	t.Helper()
	needRoot(t)
	dir := t.TempDir()
	mount(t, dir, size)
	return dir
}

// Move puts the folder dir on a file system of size of its own, keeping
// what it holds (a data directory that init wrote), and returns dir.
func Move(t testing.TB, dir, size string) string {
	t.Helper()
	needRoot(t)
	kept := dir + ".kept"
	if err := os.Rename(dir, kept); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	mount(t, dir, size)
	if out, err := exec.Command("cp", "-a", kept+"/.", dir+"/").CombinedOutput(); err != nil {
		t.Fatalf("copy %s onto its small disk: %v: %s", dir, err, out)
	}
	return dir
}

// Fill writes the file name in dir until its file system has no byte
// left, as another process would.
func Fill(t testing.TB, dir, name string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for _, n := range []int{len(buf), 4096, 1} {
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				break
			}
		}
	}
}

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("this test mounts a tmpfs, which needs root; CI runs as root")
	}
	t.Skip("SKIPPED: this test mounts a tmpfs, which needs root")
}

func mount(t testing.TB, dir, size string) {
	t.Helper()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
}

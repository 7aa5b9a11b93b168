package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// names lists dir's entries, so a test sees what a commit left beside the
// final name.
func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCommitReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Create(path, ".tmp-f-*", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(f.Name()), ".tmp-f-") {
		t.Fatalf("temporary name %s does not follow the pattern", f.Name())
	}
	f.WriteString("new")
	synced := ""
	f.SyncDir = func(d string) error { synced = d; return SyncDir(d) }
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, path); got != "new" {
		t.Fatalf("the file holds %q, want new", got)
	}
	if synced != dir {
		t.Fatalf("the folder synced was %q, want %q", synced, dir)
	}
	if got := names(t, dir); len(got) != 1 {
		t.Fatalf("the folder holds %v, want the file alone", got)
	}
	if err := f.Commit(); err == nil {
		t.Fatal("a second commit succeeded")
	}
}

func TestCommitNewRefusesAnExistingName(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	if err := WriteNew(path, []byte("first"), 0o400); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o400 {
		t.Fatalf("mode %v, want 0400", fi.Mode().Perm())
	}
	err = WriteNew(path, []byte("second"), 0o400)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("writing over an existing file: %v, want fs.ErrExist", err)
	}
	if strings.Contains(err.Error(), dir) {
		t.Fatalf("the error %q names the path", err)
	}
	if got := read(t, path); got != "first" {
		t.Fatalf("the file holds %q, want first", got)
	}
	if got := names(t, dir); len(got) != 1 {
		t.Fatalf("the folder holds %v, want the file alone", got)
	}
}

func TestAbortRemovesTheTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	f, err := Create(filepath.Join(dir, "f"), "", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(f.Name()), ".f.tmp-") {
		t.Fatalf("default temporary name %s", f.Name())
	}
	f.WriteString("x")
	f.Abort()
	f.Abort()
	if got := names(t, dir); len(got) != 0 {
		t.Fatalf("the folder holds %v after Abort", got)
	}
	if err := f.CommitNew(); err == nil {
		t.Fatal("a commit after Abort succeeded")
	}
}

func TestLinkPublishesAFileWrittenByName(t *testing.T) {
	dir := t.TempDir()
	tmp, path := filepath.Join(dir, ".scratch"), filepath.Join(dir, "db")
	if err := os.WriteFile(tmp, []byte("rows"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Link(tmp, path); err != nil {
		t.Fatal(err)
	}
	if got := read(t, path); got != "rows" {
		t.Fatalf("the file holds %q", got)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the temporary name is still there: %v", err)
	}
	os.WriteFile(tmp, []byte("other"), 0o600)
	if err := Link(tmp, path); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("linking over an existing file: %v, want fs.ErrExist", err)
	}
	if got := read(t, path); got != "rows" {
		t.Fatalf("the file holds %q after a refused link", got)
	}
}

func TestSyncErrorsNameTheStepNotThePath(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "tenant-id")
	err := SyncDir(missing)
	if !errors.Is(err, fs.ErrNotExist) || err.Error() != "open the folder: no such file or directory" {
		t.Fatalf("SyncDir of a missing folder: %v", err)
	}
}

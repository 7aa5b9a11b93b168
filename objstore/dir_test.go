package objstore_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/objstore/storetest"
)

func newDir(t *testing.T) (*objstore.Dir, string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	d, err := objstore.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	return d, root
}

func TestDirConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store {
		d, _ := newDir(t)
		return d
	})
}

func TestNewDir(t *testing.T) {
	d, root := newDir(t)
	if got := d.String(); got != "directory "+root {
		t.Errorf("String: %q", got)
	}
	if _, err := objstore.NewDir(filepath.Join(root, "absent")); err == nil {
		t.Error("a missing data directory was accepted")
	}
	file := filepath.Join(root, "file")
	os.WriteFile(file, nil, 0o600)
	if _, err := objstore.NewDir(file); err == nil {
		t.Error("a file was accepted as the data directory")
	}
}

func TestDirRefusesEscapes(t *testing.T) {
	d, root := newDir(t)
	outside := filepath.Dir(root)
	ctx := t.Context()
	for _, key := range []string{
		"", "/", "../escape", "objects/../../escape", "objects/..", "./objects/a",
		"/etc/passwd", "objects//a", "objects/a/", "a\x00b", `..\escape`, `objects\..\..\escape`,
		".tmp-123", "objects/.tmp-123/a", "objects/t/.tmp-123",
	} {
		if _, err := d.Upload(ctx, key, false); err == nil {
			t.Errorf("upload %q accepted", key)
		}
		if _, err := d.Get(ctx, key); err == nil || errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("get %q: got %v, want a refusal", key, err)
		}
		if _, err := d.GetRange(ctx, key, 0, 1); err == nil || errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("get range %q: got %v, want a refusal", key, err)
		}
		if _, err := d.Stat(ctx, key); err == nil || errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("stat %q: got %v, want a refusal", key, err)
		}
		if err := d.Delete(ctx, key); err == nil {
			t.Errorf("delete %q accepted", key)
		}
	}
	for _, prefix := range []string{"/", "../", "objects/../../", "/etc/", "a\x00/", `..\/`} {
		err := d.List(ctx, prefix, func(i objstore.Info) error {
			t.Errorf("list %q gave %q", prefix, i.Key)
			return nil
		})
		if err == nil {
			t.Errorf("list %q accepted", prefix)
		}
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Errorf("something was written beside the data directory: %v", entries)
	}
}

func TestDirErrorsNameNoKey(t *testing.T) {
	d, root := newDir(t)
	// A file where the tenant's folder should be makes the upload fail.
	os.WriteFile(filepath.Join(root, "objects"), nil, 0o600)
	_, err := d.Upload(t.Context(), "objects/0190e5d2-tenant/version", false)
	if err == nil {
		t.Fatal("upload under a file succeeded")
	}
	if strings.Contains(err.Error(), "tenant") || strings.Contains(err.Error(), root) {
		t.Errorf("error names the path: %v", err)
	}
}

// findTemps returns the temporary files under root.
func findTemps(t *testing.T, root string) []string {
	t.Helper()
	var temps []string
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(e.Name(), ".tmp-") {
			temps = append(temps, p)
		}
		return nil
	})
	return temps
}

func TestDirStaleTemps(t *testing.T) {
	d, root := newDir(t)
	ctx := t.Context()
	if err := objstore.Put(ctx, d, "objects/t/kept", strings.NewReader("kept"), false); err != nil {
		t.Fatal(err)
	}
	// An upload never committed nor aborted is what a crash leaves.
	u, err := d.Upload(ctx, "objects/t/crashed", false)
	if err != nil {
		t.Fatal(err)
	}
	u.Write([]byte("half"))
	temps := findTemps(t, root)
	if len(temps) != 1 || filepath.Dir(temps[0]) != filepath.Join(root, "objects", "t") {
		t.Fatalf("temporary files %v, want one beside the object", temps)
	}
	var listed []string
	d.List(ctx, "", func(i objstore.Info) error { listed = append(listed, i.Key); return nil })
	if len(listed) != 1 || listed[0] != "objects/t/kept" {
		t.Errorf("list shows %v", listed)
	}
	if _, err := d.Get(ctx, "objects/t/crashed"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("get of the crashed upload: %v", err)
	}
	tempKey := "objects/t/" + filepath.Base(temps[0])
	if _, err := d.Get(ctx, tempKey); err == nil {
		t.Error("the temporary file is readable by its name")
	}

	// A fresh temporary file may be an upload in progress: it stays.
	if n, err := d.RemoveStaleTemps(time.Hour); err != nil || n != 0 {
		t.Errorf("remove fresh temps: %d, %v", n, err)
	}
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(temps[0], old, old)
	if n, err := d.RemoveStaleTemps(time.Hour); err != nil || n != 1 {
		t.Errorf("remove stale temps: %d, %v; want 1", n, err)
	}
	if left := findTemps(t, root); len(left) != 0 {
		t.Errorf("left %v", left)
	}
	if _, err := os.Stat(filepath.Join(root, "objects", "t", "kept")); err != nil {
		t.Errorf("the object went too: %v", err)
	}
	// The cut-off upload can no longer publish anything.
	if err := u.Commit(); err == nil {
		t.Error("commit of a removed temporary file succeeded")
	}
	if _, err := d.Stat(ctx, "objects/t/crashed"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("stat of the crashed upload: %v", err)
	}
}

func TestDirPermissions(t *testing.T) {
	d, root := newDir(t)
	if err := objstore.Put(t.Context(), d, "objects/t/v", strings.NewReader("sealed"), true); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path string
		want fs.FileMode
	}{
		{"objects", fs.ModeDir | 0o700},
		{"objects/t", fs.ModeDir | 0o700},
		{"objects/t/v", 0o600},
	} {
		fi, err := os.Stat(filepath.Join(root, tt.path))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != tt.want {
			t.Errorf("%s: mode %v, want %v", tt.path, fi.Mode(), tt.want)
		}
	}
	if temps := findTemps(t, root); len(temps) != 0 {
		t.Errorf("temporary files left: %v", temps)
	}
}

func TestDirFolderIsNoObject(t *testing.T) {
	d, root := newDir(t)
	ctx := t.Context()
	os.MkdirAll(filepath.Join(root, "objects", "t", "sub"), 0o700)
	if _, err := d.Stat(ctx, "objects/t/sub"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("stat of a folder: %v", err)
	}
	if _, err := d.Get(ctx, "objects/t/sub"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("get of a folder: %v", err)
	}
	if err := d.Delete(ctx, "objects/t/sub"); err != nil {
		t.Errorf("delete of a folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "objects", "t", "sub")); err != nil {
		t.Errorf("delete removed a folder: %v", err)
	}
}

// TestDirPatch: Patch rewrites bytes of an object in place, in the same
// file, and refuses a span past its end, a missing object and a key
// outside the directory, changing nothing.
func TestDirPatch(t *testing.T) {
	d, root := newDir(t)
	ctx := t.Context()
	if err := objstore.Put(ctx, d, "replica/head", strings.NewReader("0123456789"), false); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "replica", "head")
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Patch(ctx, "replica/head", 4, []byte("ab")); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "0123ab6789" || !os.SameFile(before, after) {
		t.Fatalf("after a patch: %q, same file %v; want 0123ab6789 in the same file", b, os.SameFile(before, after))
	}
	if err := d.Patch(ctx, "replica/head", 8, []byte("xyz")); err == nil || !strings.Contains(err.Error(), "too few") {
		t.Fatalf("a patch past the end: %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "0123ab6789" {
		t.Fatalf("a refused patch changed the object: %q", b)
	}
	if err := d.Patch(ctx, "replica/none", 0, []byte("x")); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("a patch of a missing object: %v, want ErrNotFound", err)
	}
	if err := d.Patch(ctx, "../escape", 0, []byte("x")); err == nil {
		t.Fatal("a patch outside the directory was taken")
	}
	if temps := findTemps(t, root); len(temps) != 0 {
		t.Fatalf("a patch left temporary files: %v", temps)
	}
}

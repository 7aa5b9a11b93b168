package diskspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/smalldisk"

	"github.com/vcon-server/vcon-server/internal/metrics"
	"github.com/vcon-server/vcon-server/internal/reserve"
	"github.com/vcon-server/vcon-server/objstore"
)

// Spare passes every call through, the start-up clean-up of temporary
// files too (archive.Recover finds it by its method).
func TestSparePassesThrough(t *testing.T) {
	dir := t.TempDir()
	d, err := objstore.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := Spare(objstore.NewMetered(d, metrics.NewRegistry()), dir, func(key string) bool { return strings.HasPrefix(key, "purged/") })
	if _, ok := s.(interface {
		RemoveStaleTemps(time.Duration) (int, error)
	}); !ok {
		t.Fatal("Spare hides RemoveStaleTemps: a start would leave a killed store's temporary files")
	}
	ctx := context.Background()
	for _, key := range []string{"objects/t/v", "purged/t/v"} {
		if err := objstore.Put(ctx, s, key, strings.NewReader("x"), true); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		if err := objstore.Put(ctx, s, key, strings.NewReader("x"), true); err == nil {
			t.Fatalf("a create-only put of %s over an object succeeded", key)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "purged", "t", "v")); err != nil {
		t.Fatal(err)
	}
	if reserve.Held(dir) != 0 {
		t.Fatal("a reserve appeared")
	}
}

// On a file system filled to its last byte, a purge's write takes the
// reserve; a store's does not.
func TestSpareTakesTheReserve(t *testing.T) {
	dir := smalldisk.New(t, "48m")
	d, err := objstore.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := Spare(d, dir, func(key string) bool { return strings.HasPrefix(key, "purged/") })
	ctx := context.Background()
	if made, err := reserve.Make(dir); !made || err != nil {
		t.Fatalf("make the reserve: %v %v", made, err)
	}
	held := reserve.Held(dir) // a twentieth of 48 MiB
	smalldisk.Fill(t, dir, "filler")
	if err := objstore.Put(ctx, s, "objects/t/v", strings.NewReader("a store"), true); !reserve.IsFull(err) {
		t.Fatalf("a store on a full disk: %v, want a full-disk error", err)
	}
	if reserve.Held(dir) != held {
		t.Fatal("a store took the reserve")
	}
	if err := objstore.Put(ctx, s, "purged/t/v", strings.NewReader("a purge's write"), true); err != nil {
		t.Fatalf("a purge's write on a full disk: %v", err)
	}
	if reserve.Held(dir) != 0 {
		t.Fatal("the purge's write did not take the reserve")
	}
}

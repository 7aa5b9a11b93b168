package catalog

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/smalldisk"

	"github.com/vcon-server/vcon-server/internal/reserve"
)

// TestFullDiskCommits: on a file system another process filled to its
// last byte, a write to the catalog is first refused for space, gives the
// reserve back and commits; once the reserve is spent, the refusal is what
// a caller sees. Both with the catalog open before the disk filled (a
// server) and opened after (a CLI command while none runs).
func TestFullDiskCommits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := smalldisk.New(t, "48m")
	mk := masterKey(t, 1)
	c, _, err := Create(ctx, dir, mk.CheckValue())
	if err != nil {
		t.Fatal(err)
	}
	if made, err := reserve.Make(dir); err != nil || !made {
		t.Fatalf("make the reserve: %v %v", made, err)
	}
	if _, err := c.NewTenant(ctx, "acme", Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Checkpoint(ctx); err != nil { // the log is empty: a commit needs new blocks
		t.Fatal(err)
	}
	smalldisk.Fill(t, dir, "filler")
	if _, err := c.NewTenant(ctx, "globex", Actor{Name: "test"}); err != nil {
		t.Fatalf("a commit on a full disk with the reserve: %v", err)
	}
	if h := reserve.Held(dir); h != 0 {
		t.Fatalf("the reserve holds %d bytes after a commit on a full disk, want 0", h)
	}
	c.Close()

	// Opened on a full disk, as a CLI command is while no server runs.
	if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
		t.Fatal(err)
	}
	if made, err := reserve.Make(dir); err != nil || !made {
		t.Fatalf("make the reserve again: %v %v", made, err)
	}
	smalldisk.Fill(t, dir, "filler")
	c, err = Open(ctx, dir)
	if err != nil {
		t.Fatalf("open on a full disk with the reserve: %v", err)
	}
	defer c.Close()
	if _, err := c.NewTenant(ctx, "initech", Actor{Name: "test"}); err != nil {
		t.Fatalf("a commit on a full disk, opened there, with the reserve: %v", err)
	}
	if h := reserve.Held(dir); h != 0 {
		t.Fatalf("the reserve holds %d bytes, want 0", h)
	}

	// Without a reserve the disk refuses: what the reserve is for.
	smalldisk.Fill(t, dir, "filler2")
	for i := 0; ; i++ {
		_, err := c.NewTenant(ctx, "t"+string(rune('a'+i%26))+string(rune('a'+i/26)), Actor{Name: "test"})
		if err != nil {
			if !reserve.IsFull(err) {
				t.Fatalf("a commit on a full disk without the reserve: %v, want a full-disk error", err)
			}
			break
		}
		if i == 500 {
			t.Fatal("500 commits on a full disk without the reserve succeeded")
		}
	}
}

package reserve

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/vcon-server/vcon-server/internal/s3sig"
)

func TestMakeRelease(t *testing.T) {
	dir := t.TempDir()
	size, err := Size(dir)
	if err != nil || size <= 0 {
		t.Fatalf("Size: %d %v", size, err)
	}
	made, err := Make(dir)
	if err != nil || !made {
		t.Fatalf("Make: %v %v", made, err)
	}
	if h := Held(dir); h < size {
		t.Fatalf("the reserve holds %d bytes, want %d allocated", h, size)
	}
	if made, err := Make(dir); err != nil || made {
		t.Fatalf("Make over a whole reserve: %v %v", made, err)
	}
	if n, err := Release(dir); err != nil || n < size {
		t.Fatalf("Release: %d %v", n, err)
	}
	if n, err := Release(dir); err != nil || n != 0 {
		t.Fatalf("Release of a released reserve: %d %v", n, err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the reserve is still there: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".tmp-*"))
	if len(left) > 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// The reserve is a twentieth of the file system, at most 16 MiB, in
// whole blocks: a file system of 16 MiB gets one too.
func TestSizeFor(t *testing.T) {
	for _, c := range []struct {
		total uint64
		want  int64
	}{
		{16 << 20, 835584},  // 816 KiB
		{48 << 20, 2514944}, // 2,456 KiB
		{320 << 20, 16 << 20},
		{1 << 40, 16 << 20},
		{40 << 10, 0},
		{0, 0},
	} {
		if got := SizeFor(c.total); got != c.want || got%4096 != 0 || uint64(got) > c.total/20 {
			t.Errorf("SizeFor(%d) = %d, want %d", c.total, got, c.want)
		}
	}
}

// Make never takes the last bytes: it waits for room for the reserve
// twice over, the reserve of that file system's size.
func TestMakeWaitsForRoom(t *testing.T) {
	dir := t.TempDir()
	old := Statfs
	t.Cleanup(func() { Statfs = old })
	const total = 16 << 20
	size := uint64(SizeFor(total))
	Statfs = func(string) (uint64, uint64, error) { return 2*size - 1, total, nil }
	if made, err := Make(dir); !errors.Is(err, ErrNoRoom) || made || Held(dir) != 0 {
		t.Fatalf("Make without room: %v %v, holds %d", made, err, Held(dir))
	}
	Statfs = func(string) (uint64, uint64, error) { return 2 * size, total, nil }
	if made, err := Make(dir); err != nil || !made {
		t.Fatalf("Make with room: %v %v", made, err)
	}
	if h := Held(dir); h < int64(size) || h > int64(size)+4096 || !Whole(dir) {
		t.Fatalf("the reserve of a 16 MiB file system holds %d bytes, want %d", h, size)
	}
	// The file system grew: the reserve is short, and made again bigger.
	Statfs = func(string) (uint64, uint64, error) { return 1 << 30, 1 << 40, nil }
	if Whole(dir) {
		t.Fatal("a reserve of 816 KiB is whole on a file system of 1 TiB")
	}
	if made, err := Make(dir); err != nil || !made || Held(dir) < MaxSize {
		t.Fatalf("Make on the grown file system: %v %v, holds %d", made, err, Held(dir))
	}
}

type coded int

func (c coded) Error() string { return fmt.Sprintf("sqlite %d", int(c)) }
func (c coded) Code() int     { return int(c) }

func TestIsFull(t *testing.T) {
	for _, err := range []error{
		&os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC},
		fmt.Errorf("catalog: commit: %w", coded(13)),
		coded(13 | 3<<8),
		coded(10 | 19<<8), // SQLITE_IOERR_SHMSIZE
		&s3sig.Error{StatusCode: 507, Code: "InsufficientStorage"},
		&s3sig.Error{StatusCode: 403, Code: "QuotaExceeded"},
		&s3sig.Error{StatusCode: 507, Code: "XMinioStorageFull"},
	} {
		if !IsFull(err) {
			t.Errorf("IsFull(%v) = false", err)
		}
	}
	for _, err := range []error{nil, errors.New("full"), coded(5), syscall.EIO, &s3sig.Error{StatusCode: 503, Code: "SlowDown"}} {
		if IsFull(err) {
			t.Errorf("IsFull(%v) = true", err)
		}
	}
}

// Where fallocate is missing, the reserve is written out in bytes no
// compression or deduplication can fold away.
func TestWriteOut(t *testing.T) {
	var buf bytes.Buffer
	if err := writeOut(&buf, 3<<20+5); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if len(b) != 3<<20+5 {
		t.Fatalf("%d bytes written, want %d", len(b), 3<<20+5)
	}
	if bytes.Equal(b[:1<<20], b[1<<20:2<<20]) || bytes.Count(b[:1<<20], []byte{0}) > 1<<14 {
		t.Fatal("the reserve's bytes repeat or are zeros")
	}
}

// TestShrink: a note's slice leaves the rest of the reserve held, and a
// reserve no bigger than the slice is left alone for the deletes.
func TestShrink(t *testing.T) {
	dir := t.TempDir()
	if made, err := Make(dir); !made || err != nil {
		t.Fatalf("Make: %v %v", made, err)
	}
	held := Held(dir)
	freed, err := Shrink(dir, 128<<10)
	if err != nil || freed <= 0 || Held(dir) != held-freed || Held(dir) <= 0 {
		t.Fatalf("Shrink: freed %d (%v), held %d of %d", freed, err, Held(dir), held)
	}
	if freed, err := Shrink(dir, Held(dir)+1); freed != 0 || err != nil {
		t.Fatalf("Shrink past the reserve: freed %d (%v)", freed, err)
	}
	Release(dir)
	if freed, err := Shrink(dir, 1); freed != 0 || err != nil {
		t.Fatalf("Shrink of no reserve: freed %d (%v)", freed, err)
	}
}

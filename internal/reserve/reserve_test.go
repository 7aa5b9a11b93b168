package reserve

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/vcon-server/vcon-server/s3sig"
)

func TestMakeRelease(t *testing.T) {
	dir := t.TempDir()
	made, err := Make(dir)
	if err != nil || !made {
		t.Fatalf("Make: %v %v", made, err)
	}
	if h := Held(dir); h < Size {
		t.Fatalf("the reserve holds %d bytes, want %d allocated", h, Size)
	}
	if made, err := Make(dir); err != nil || made {
		t.Fatalf("Make over a whole reserve: %v %v", made, err)
	}
	if n, err := Release(dir); err != nil || n < Size {
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

// Make never takes the last bytes: it waits for room for the reserve
// twice over.
func TestMakeWaitsForRoom(t *testing.T) {
	dir := t.TempDir()
	old := Statfs
	t.Cleanup(func() { Statfs = old })
	Statfs = func(string) (uint64, uint64, error) { return 2*Size - 1, 1 << 40, nil }
	if made, err := Make(dir); err != nil || made || Held(dir) != 0 {
		t.Fatalf("Make without room: %v %v, holds %d", made, err, Held(dir))
	}
	Statfs = func(string) (uint64, uint64, error) { return 2 * Size, 1 << 40, nil }
	if made, err := Make(dir); err != nil || !made {
		t.Fatalf("Make with room: %v %v", made, err)
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

// Package reserve keeps room to delete on the data directory's file
// system: a file of preallocated blocks (FileName; a twentieth of the file
// system, at most 16 MiB: SizeFor) that any vcon-server process
// gives back at once when a write that frees space later (a catalog commit, a purge's tombstone or count) fails because the
// disk is full, and that serve makes again once there is room
// (docs/FORMAT.md, "The data directory"; docs/troubleshooting.md, "The
// disk is low"). Without it a full disk would refuse the very commits
// that destroy keys and delete bytes.
//
// Statfs is the one place free space is measured, so tests can set it.
package reserve

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"

	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/durable"
	"github.com/vcon-server/vcon-server/internal/s3sig"
)

// FileName is the reserve's name inside the data directory.
const FileName = "space.reserve"

// MaxSize is the largest reserve: 16 MiB, about 4,000 pages of the
// catalog's write-ahead log. A 0d DELETE commits a few pages and a purge
// sweep a few per version before the checkpoint gives them back, so this
// carries a retention change, thousands of purges and their audit
// records, and the small files a purge writes, until the bytes they
// delete free far more.
const MaxSize = 16 << 20

// SizeFor is the reserve of a file system of total bytes: a twentieth of
// it, at most MaxSize, in whole 4 KiB blocks. A fixed 16 MiB, made only
// with room for it twice over, was never made on a file system under
// 32 MiB, and one of 32 to 64 MiB gave a third of itself or more to it.
// A twentieth of 16 MiB (816 KiB) still carries a 0d DELETE or a purge
// sweep of a few versions, whose deletes then free more.
func SizeFor(total uint64) int64 {
	n := min(int64(total/20), MaxSize)
	return n &^ 4095
}

// Statfs returns the bytes free to this process and the size of the file
// system holding dir.
var Statfs = func(dir string) (free, total uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("reserve: statfs %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}

// Size is the reserve of dir's file system (SizeFor).
func Size(dir string) (int64, error) {
	_, total, err := Statfs(dir)
	if err != nil {
		return 0, err
	}
	return SizeFor(total), nil
}

// Whole reports whether the reserve holds its blocks: a file system may
// count a few less than it was given. A reserve made for a file system
// since grown is short, and made again at its new size.
func Whole(dir string) bool {
	size, err := Size(dir)
	return err == nil && size > 0 && Held(dir) >= size-size/16
}

// Held is the bytes the reserve holds on disk now: 0 when released.
func Held(dir string) int64 {
	fi, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}

// Release gives the reserve back to the file system and returns the bytes
// it held: 0 when another process (or an earlier call) released it first.
// It needs no space itself: an unlink frees blocks.
func Release(dir string) (int64, error) {
	held := Held(dir)
	err := os.Remove(filepath.Join(dir, FileName))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reserve: release: %w", err)
	}
	// A kill here leaves the reserve released: serve makes it again once
	// there is room, at its start or its next look at the disk.
	crashpoint.Hit(crashpoint.ReserveReleased)
	return held, nil
}

// Shrink gives n bytes of the reserve back and keeps the rest, for a write
// that frees nothing later (the record of a refusal): it must not take the
// room a delete needs. It returns the bytes given back, 0 when the reserve
// holds no more than n. A truncate needs no space.
func Shrink(dir string, n int64) (int64, error) {
	f, err := os.OpenFile(filepath.Join(dir, FileName), os.O_WRONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reserve: shrink: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() <= n {
		return 0, err
	}
	before := Held(dir)
	if err := f.Truncate(fi.Size() - n); err != nil {
		return 0, fmt.Errorf("reserve: shrink: %w", err)
	}
	return before - Held(dir), nil
}

// ErrNoRoom is Make's answer when the file system has no room for the
// reserve twice over.
var ErrNoRoom = errors.New("reserve: the file system has no room for the reserve twice over")

// Make makes the reserve when it is missing or short and the file system
// has room for it twice over, so that making it never takes the last
// bytes: what is left is as much again, for the writes that go on
// meanwhile. It reports whether it made one, and ErrNoRoom when there is
// no room for it. The blocks are allocated, not sparse: a full disk
// cannot take them back.
func Make(dir string) (bool, error) {
	if Whole(dir) {
		return false, nil
	}
	// A kill while making it left a temporary file: only serve makes the
	// reserve, and one serve at a time holds the data directory. Its
	// blocks are given back first, as room for the new one.
	stale, _ := filepath.Glob(filepath.Join(dir, ".tmp-"+FileName+"-*"))
	for _, p := range stale {
		os.Remove(p)
	}
	free, total, err := Statfs(dir)
	if err != nil {
		return false, err
	}
	size := SizeFor(total)
	if size == 0 || free < 2*uint64(size) {
		return false, ErrNoRoom
	}
	// The temporary name is the one a start removes above, should a kill
	// cut this off.
	f, err := durable.Create(filepath.Join(dir, FileName), ".tmp-"+FileName+"-*", 0o600)
	if err != nil {
		return false, fmt.Errorf("reserve: make: %w", err)
	}
	if err := allocate(f.File, size); err != nil {
		f.Abort()
		return false, fmt.Errorf("reserve: make: %w", err)
	}
	// The folder is synced so that the name survives a power cut: else the
	// reserve's blocks could come back after it under the temporary name,
	// held, and the reserve missing on a disk that may have filled since
	// (a start removes that file again, above). Release syncs nothing: a
	// reserve that a power cut brings back is only more room.
	if err := f.Commit(); err != nil {
		// Made all the same when only the folder's sync failed: the
		// reserve is in place, if not durably.
		return Whole(dir), fmt.Errorf("reserve: make: %w", err)
	}
	return true, nil
}

// allocate gives f n bytes of real blocks: fallocate where the file system
// has it, else bytes written out. The bytes are pseudo-random, never
// zeros nor a repeated buffer: a file system that compresses or
// deduplicates (ZFS, which has no fallocate) would keep no blocks for
// those.
func allocate(f *os.File, n int64) error {
	err := syscall.Fallocate(int(f.Fd()), 0, 0, n)
	if err == nil || !(errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS)) {
		return err
	}
	return writeOut(f, n)
}

func writeOut(w io.Writer, n int64) error {
	rng := rand.NewChaCha8([32]byte{'v', 'c', 'o', 'n', '-', 'r', 'e', 's', 'e', 'r', 'v', 'e'})
	buf := make([]byte, 1<<20)
	for left := n; left > 0; left -= int64(len(buf)) {
		if left < int64(len(buf)) {
			buf = buf[:left]
		}
		rng.Read(buf)
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

// SQLite's result codes for a full disk: SQLITE_FULL, and
// SQLITE_IOERR_SHMSIZE, what opening a catalog answers when its
// shared-memory file cannot grow.
const (
	sqliteFull         = 13
	sqliteIOErrShmSize = 10 | 19<<8
)

// IsFull reports whether err is a write refused for want of space: the
// file system's ENOSPC or quota, SQLite's "database or disk is full" or
// a shared-memory file that cannot grow, or a bucket's quota
// (s3sig.ErrInsufficientStorage).
func IsFull(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, s3sig.ErrInsufficientStorage) {
		return true
	}
	var coded interface{ Code() int }
	return errors.As(err, &coded) && (coded.Code()&0xff == sqliteFull || coded.Code() == sqliteIOErrShmSize)
}

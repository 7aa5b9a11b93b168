// Package durable writes files that a crash or a power cut leaves whole or
// absent, never torn: the bytes go to a temporary name in the final
// folder and are synced, then the final name is given to them (a rename,
// or a link that never replaces), then the folder is synced so the name
// survives too (docs/FORMAT.md, "The data directory": write new under a
// fresh name, then commit). Every writer of the data directory, the
// master key and the TLS files goes through it, and so does the object
// store's directory back end, which shares its folder syncs between
// concurrent commits (File.SyncDir).
//
// Files are opened without the runtime's network poller (OpenFile).
// Errors name the step that failed, never the path: the data directory's
// paths hold tenant ids, which the server's log must not show, so a caller
// names the file where it may.
package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// OpenFile opens name as os.OpenFile does, handing the descriptor to
// os.NewFile instead. os.OpenFile makes every descriptor non-blocking and
// offers it to the runtime's network poller, which refuses regular files
// and folders, then makes it blocking again: four system calls more for
// each object read, written or folder synced, about a tenth of an export's
// CPU. Files and folders block on I/O either way.
func OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	for {
		fd, err := syscall.Open(name, flag|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if err == nil {
			return os.NewFile(uintptr(fd), name), nil
		}
		if !errors.Is(err, syscall.EINTR) {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
	}
}

// CreateTemp makes a new file with mode perm in dir, named pattern with
// its last "*" replaced by random digits (appended when it has none), as
// os.CreateTemp does: O_EXCL, so two callers never share one.
func CreateTemp(dir, pattern string, perm os.FileMode) (*os.File, error) {
	prefix, suffix := pattern, ""
	if i := strings.LastIndexByte(pattern, '*'); i >= 0 {
		prefix, suffix = pattern[:i], pattern[i+1:]
	}
	for try := 0; ; try++ {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10)+suffix)
		f, err := OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) && try < 10000 {
			continue
		}
		return f, err
	}
}

// Datasync syncs f's bytes and what reading them back needs, but not its
// times (fdatasync): for a file rewritten in place, whose size and blocks
// stay, it is one write of the blocks, with no journal commit to wait for.
func Datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// SyncFile syncs the file at path: for bytes another writer put there
// (SQLite's VACUUM INTO syncs nothing). An fsync covers every write to
// the file, whichever descriptor made it.
func SyncFile(path string) error {
	return syncPath(path, "file")
}

// SyncDir syncs the folder dir, so that the names created, renamed,
// linked or removed in it survive a power cut (Litestream's
// internal.FsyncDir).
func SyncDir(dir string) error {
	return syncPath(dir, "folder")
}

func syncPath(path, what string) error {
	f, err := OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return step("open the "+what, err)
	}
	err = f.Sync()
	f.Close()
	if err != nil {
		return step("sync the "+what, err)
	}
	return nil
}

// File is a new file written under a temporary name beside its final
// one, which only Commit or CommitNew gives it. Write through the
// embedded *os.File; Abort (or a failed commit) removes it.
type File struct {
	*os.File
	path string
	// SyncDir syncs the folder once the final name is in place; nil means
	// SyncDir. The object store sets its own, which shares one sync of a
	// folder between the commits that wait for it (docs/FORMAT.md).
	SyncDir func(dir string) error
	done    bool
}

var errEnded = errors.New("the file was already committed or aborted")

// Create starts the file that will be named path: a new file with mode
// perm in path's folder, named by pattern as CreateTemp names it. The
// pattern is the caller's, so what a crash leaves is named as its
// clean-up looks for it; "" gives "." + the final name + ".tmp-*".
func Create(path, pattern string, perm os.FileMode) (*File, error) {
	if pattern == "" {
		pattern = "." + filepath.Base(path) + ".tmp-*"
	}
	f, err := CreateTemp(filepath.Dir(path), pattern, perm)
	if err != nil {
		return nil, step("create a temporary file", err)
	}
	return &File{File: f, path: path}, nil
}

// Commit makes the bytes written durable under the final name, replacing
// a file of that name: sync, close, rename, then the folder's sync.
func (f *File) Commit() error { return f.commit(true) }

// CommitNew is Commit without replacing: the name is given with link(2),
// which fails atomically when it exists (an error wrapping fs.ErrExist),
// so of two writers of one name exactly one wins.
func (f *File) CommitNew() error { return f.commit(false) }

func (f *File) commit(replace bool) error {
	if f.done {
		return errEnded
	}
	f.done = true
	if err := f.place(replace); err != nil {
		f.File.Close()
		os.Remove(f.Name())
		return err
	}
	sync := f.SyncDir
	if sync == nil {
		sync = SyncDir
	}
	return sync(filepath.Dir(f.path))
}

// place gives the synced bytes their final name. The bytes must be on
// disk before any name points to them: a crash after the rename must not
// publish an empty or torn file.
func (f *File) place(replace bool) error {
	if err := f.Sync(); err != nil {
		return step("sync the file", err)
	}
	if err := f.File.Close(); err != nil {
		return step("close the file", err)
	}
	if replace {
		if err := os.Rename(f.Name(), f.path); err != nil {
			return step("rename the file into place", err)
		}
		return nil
	}
	return link(f.Name(), f.path)
}

func link(tmp, path string) error {
	err := os.Link(tmp, path)
	os.Remove(tmp)
	if err != nil {
		return step("link the file into place", err)
	}
	return nil
}

// Abort closes and removes the temporary file; after a commit it does
// nothing.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.File.Close()
	os.Remove(f.Name())
}

// WriteNew writes data as the new file path, mode perm, durably and whole
// or not at all; an existing path is left as it is and refused with an
// error wrapping fs.ErrExist.
func WriteNew(path string, data []byte, perm os.FileMode) error {
	f, err := Create(path, "", perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return step("write the file", err)
	}
	return f.CommitNew()
}

// Link publishes the file tmp, which another writer filled (a catalog
// SQLite wrote by name), as the new file path in the same folder: it syncs
// tmp, links it under path, never replacing (an existing path gives an
// error wrapping fs.ErrExist), removes tmp and syncs the folder.
func Link(tmp, path string) error {
	if err := SyncFile(tmp); err != nil {
		return err
	}
	if err := link(tmp, path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// step names the step that failed and keeps the error's cause, without
// the path os puts in it.
func step(what string, err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	return fmt.Errorf("%s: %w", what, err)
}

package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/vcon-server/vcon-server/internal/durable"
)

// tempPrefix starts the name of a file still being written. List never shows
// such a file, RemoveStaleTemps removes the ones a crash left, and no key may
// hold a segment starting with it, so a temporary name never collides with
// an object.
const tempPrefix = ".tmp-"

// Dir is a Store over a local directory, the server's data directory: the
// key "objects/<tenant id>/<version id>" is the file of that path under it.
type Dir struct {
	root  string
	syncs dirSyncs // the folder syncs shared by concurrent commits
}

// NewDir opens the directory root, which must exist (init creates it, with
// the mode it chooses).
func NewDir(root string) (*Dir, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("objstore: data directory %s: %w", root, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("objstore: data directory %s: %w", abs, unwrapPath(err))
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("objstore: data directory %s is not a directory", abs)
	}
	return &Dir{root: abs}, nil
}

// String names the store for operators; it never names a key.
func (d *Dir) String() string { return "directory " + d.root }

var errBadKey = errors.New("objstore: invalid object key")

// path maps a key to its file. Besides ValidKey, it refuses a segment that
// looks like a temporary name, so no key can reach an upload in progress.
// A valid key has no "..", no leading "/", no backslash and no NUL, so the
// joined path stays under root.
func (d *Dir) path(key string) (string, error) {
	if !ValidKey(key) || hasTempSegment(key) {
		return "", errBadKey
	}
	return filepath.Join(d.root, filepath.FromSlash(key)), nil
}

func hasTempSegment(key string) bool {
	for seg := range strings.SplitSeq(key, "/") {
		if strings.HasPrefix(seg, tempPrefix) {
			return true
		}
	}
	return false
}

// Upload creates a temporary file beside the object's final name; Commit
// syncs it and publishes it (docs/FORMAT.md: write new under a fresh name,
// then commit).
func (d *Dir) Upload(ctx context.Context, key string, createOnly bool) (Upload, error) {
	final, err := d.path(key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir := filepath.Dir(final)
	if err := d.mkdirs(dir); err != nil {
		return nil, err
	}
	// A new file, mode 0600, made with O_EXCL under a random name:
	// concurrent uploads of one key never share a temporary file.
	f, err := durable.Create(final, tempPrefix+"*", 0o600)
	if err != nil {
		return nil, fmt.Errorf("objstore: %w", err)
	}
	// The new name is durable only once its folder is synced: by a sync
	// that starts after the rename, which concurrent commits share.
	f.SyncDir = d.syncs.sync
	return &dirUpload{ctx: ctx, f: f, createOnly: createOnly}, nil
}

// Patch writes p over the object's bytes at off and syncs them
// (objstore.Patcher); the file keeps its size, so a sync of its data is
// enough (fdatasync): no folder to sync, no new file.
func (d *Dir) Patch(ctx context.Context, key string, off int64, p []byte) error {
	path, err := d.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := durable.OpenFile(path, os.O_WRONLY, 0)
	if missing(err) {
		return ErrNotFound
	}
	if err != nil {
		return fsErr("open", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fsErr("stat", err)
	}
	if !fi.Mode().IsRegular() {
		return ErrNotFound
	}
	if off < 0 || fi.Size() < off+int64(len(p)) {
		return fmt.Errorf("objstore: %s holds %d bytes, too few to rewrite bytes %d to %d in place", key, fi.Size(), off, off+int64(len(p)))
	}
	if _, err := f.WriteAt(p, off); err != nil {
		return fsErr("write", err)
	}
	if err := durable.Datasync(f); err != nil {
		return fsErr("sync", err)
	}
	return nil
}

// mkdirs creates the folders leading to dir with mode 0700 and syncs the
// parent of each one, so a synced object is never lost with a folder entry
// that was still only in memory. It syncs after EEXIST too: a concurrent
// upload may have created the folder and not synced its parent yet. This
// costs a few syncs only when the object's folder is new.
func (d *Dir) mkdirs(dir string) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	rel, err := filepath.Rel(d.root, dir)
	if err != nil || rel == "." {
		return nil
	}
	p := d.root
	for seg := range strings.SplitSeq(rel, string(filepath.Separator)) {
		parent := p
		p = filepath.Join(p, seg)
		if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fsErr("create folder", err)
		}
		if err := durable.SyncDir(parent); err != nil {
			return fmt.Errorf("objstore: %w", err)
		}
	}
	return nil
}

type dirUpload struct {
	ctx        context.Context
	f          *durable.File
	createOnly bool
	err        error // the first write error, returned again by Commit
	done       bool
}

var errEnded = errors.New("objstore: upload already ended")

func (u *dirUpload) Write(p []byte) (int, error) {
	if u.done {
		return 0, errEnded
	}
	if u.err != nil {
		return 0, u.err
	}
	n, err := u.f.Write(p)
	if err != nil {
		u.err = fsErr("write", err)
	}
	return n, u.err
}

// Commit publishes the object with durable's steps: sync, then rename,
// or for a create-only upload link(2), which fails when the name exists,
// atomically, where rename(2) would replace it: of two concurrent
// create-only uploads exactly one wins.
func (u *dirUpload) Commit() error {
	if u.done {
		return errEnded
	}
	u.done = true
	err := u.err
	if err == nil {
		err = u.ctx.Err()
	}
	if err != nil {
		u.f.Abort()
		return err
	}
	if u.createOnly {
		err = u.f.CommitNew()
	} else {
		err = u.f.Commit()
	}
	if errors.Is(err, fs.ErrExist) {
		return ErrExists
	}
	if err != nil {
		return fmt.Errorf("objstore: %w", err)
	}
	return nil
}

// Abort removes the temporary file; after Commit it does nothing (nor
// does the file's Abort).
func (u *dirUpload) Abort() {
	u.done = true
	u.f.Abort()
}

// open opens the object's file, mapping a missing file, a missing folder on
// the way and a folder in place of a file to ErrNotFound.
func (d *Dir) open(key string) (*os.File, fs.FileInfo, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, nil, err
	}
	f, err := durable.OpenFile(p, os.O_RDONLY, 0)
	if missing(err) {
		return nil, nil, ErrNotFound
	}
	if err != nil {
		return nil, nil, fsErr("open", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fsErr("stat", err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, ErrNotFound
	}
	return f, fi, nil
}

func (d *Dir) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, _, err := d.open(key)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (d *Dir) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("objstore: negative range %d+%d", off, n)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, fi, err := d.open(key)
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	if off >= size {
		f.Close()
		return io.NopCloser(strings.NewReader("")), nil
	}
	n = min(n, size-off)
	return struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(f, off, n), f}, nil
}

func (d *Dir) Stat(ctx context.Context, key string) (Info, error) {
	p, err := d.path(key)
	if err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}
	fi, err := os.Stat(p)
	if missing(err) {
		return Info{}, ErrNotFound
	}
	if err != nil {
		return Info{}, fsErr("stat", err)
	}
	if !fi.Mode().IsRegular() {
		return Info{}, ErrNotFound
	}
	return Info{Key: key, Size: fi.Size(), Modified: fi.ModTime()}, nil
}

// Delete unlinks the file and syncs its folder, so a purge that then Stats
// the key learns the state that survives a crash.
func (d *Dir) Delete(ctx context.Context, key string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	fi, err := os.Lstat(p)
	if missing(err) {
		return nil
	}
	if err != nil {
		return fsErr("stat", err)
	}
	if fi.IsDir() {
		// A folder is not an object; os.Remove would delete an empty one.
		return nil
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fsErr("delete", err)
	}
	if err := d.syncs.sync(filepath.Dir(p)); err != nil {
		return fmt.Errorf("objstore: %w", err)
	}
	return nil
}

// fsErr turns a file system error into one that names the operation but
// not the path: the path holds a tenant id, which the server's log must
// never show.
func fsErr(op string, err error) error {
	return fmt.Errorf("objstore: %s: %w", op, unwrapPath(err))
}

// missing reports an error saying that no file has the path: none by that
// name, or a file where one of its folders should be.
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

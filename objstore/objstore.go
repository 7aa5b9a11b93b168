// Package objstore is the small interface over where sealed bytes live: a
// local data directory or an S3 bucket. Everything above it (stores, purges,
// pack runs, exports) is written once against Store; docs/FORMAT.md says
// which keys each back end holds.
package objstore

import (
	"context"
	"errors"
	"io"
	"time"
)

var (
	// ErrNotFound is returned when no object has the key.
	ErrNotFound = errors.New("objstore: no such object")
	// ErrExists is returned by a create-only upload whose key is taken.
	ErrExists = errors.New("objstore: an object already has that name")
)

// Info describes one stored object.
type Info struct {
	Key      string
	Size     int64
	Modified time.Time
}

// Store holds objects under slash-separated keys. Keys are relative
// ("objects/<tenant>/<version>"); a key never starts with "/", never holds
// an empty, "." or ".." segment. Implementations are safe for concurrent use.
type Store interface {
	// Upload starts writing the object key. Nothing is visible under key
	// until Commit returns nil; Commit returns only once the bytes are
	// durable (fsynced and renamed, or acknowledged by the bucket). With
	// createOnly, Commit returns ErrExists when key already names an object
	// and never replaces it.
	Upload(ctx context.Context, key string, createOnly bool) (Upload, error)

	// Get reads the whole object. It returns ErrNotFound when key names none.
	Get(ctx context.Context, key string) (io.ReadCloser, error)

	// GetRange reads n bytes from offset off, fewer when the object ends
	// first (none when off is at or past its end). ErrNotFound as Get.
	GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error)

	// Stat returns the object's size. ErrNotFound as Get.
	Stat(ctx context.Context, key string) (Info, error)

	// Delete removes the object. Deleting a missing key is not an error.
	// A nil error does not prove the bytes are gone: callers that promise it
	// (purges) Stat afterwards.
	Delete(ctx context.Context, key string) error

	// List calls fn for every object whose key starts with prefix, in
	// lexical order of keys within a folder. An error from fn stops the
	// listing and is returned.
	List(ctx context.Context, prefix string, fn func(Info) error) error

	// String names the store for operators ("directory /var/lib/x",
	// `bucket "vcon"`); it never names a tenant.
	String() string
}

// ManyDeleter is a Store that can delete many keys in fewer calls than
// one per key (S3's DeleteObjects). Callers use DeleteMany, which falls
// back to Delete for a store without it. As with Delete, a missing key is
// no failure and success proves nothing: purges Stat afterwards.
type ManyDeleter interface {
	// DeleteMany deletes keys and returns those it could not delete,
	// with an error saying why (nil when every key was deleted).
	DeleteMany(ctx context.Context, keys []string) (failed []string, err error)
}

// A Patcher rewrites a span of an object in place, durably: a directory,
// where the replica rewrites one slot of its head at each cut with one
// sync of the file's data, not a new file, a rename and a folder sync
// (docs/FORMAT.md, "Replica objects"). A crash may leave the span torn;
// the caller writes nothing there that another span does not cover.
type Patcher interface {
	// Patch writes p at off in the object under key, which must already
	// reach off+len(p), and returns once the bytes are synced. It returns
	// ErrNotFound when key names no object, and an error, changing
	// nothing, when the object is shorter.
	Patch(ctx context.Context, key string, off int64, p []byte) error
}

// Upload is an object being written. Exactly one of Commit or Abort ends
// it; Abort after Commit does nothing, so `defer u.Abort()` is safe.
type Upload interface {
	io.Writer
	Commit() error
	Abort()
}

// Put writes r whole under key; a convenience over Upload.
func Put(ctx context.Context, s Store, key string, r io.Reader, createOnly bool) error {
	u, err := s.Upload(ctx, key, createOnly)
	if err != nil {
		return err
	}
	defer u.Abort()
	if _, err := io.Copy(u, r); err != nil {
		return err
	}
	return u.Commit()
}

// ValidKey reports whether key is a relative, clean, slash-separated name.
func ValidKey(key string) bool {
	if key == "" || key[0] == '/' || key[len(key)-1] == '/' {
		return false
	}
	start := 0
	for i := 0; i <= len(key); i++ {
		if i == len(key) || key[i] == '/' {
			seg := key[start:i]
			if seg == "" || seg == "." || seg == ".." {
				return false
			}
			start = i + 1
		} else if key[i] == 0 || key[i] == '\\' {
			return false
		}
	}
	return true
}

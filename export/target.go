package export

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/vcon-server/vcon-server/internal/s3sig"
	"github.com/vcon-server/vcon-server/objstore"
)

// Target is an export's --to: an absolute directory, or a bucket and a
// prefix ("" or ending with "/").
type Target struct {
	To     string // as the operator wrote it
	Dir    string
	Bucket string
	Prefix string
}

// IsBucket reports whether the target is a bucket.
func (t Target) IsBucket() bool { return t.Bucket != "" }

// ParseTarget reads --to. Its refusals name what the operator typed.
func ParseTarget(to string) (Target, error) {
	if to == "" {
		return Target{}, errors.New("export parquet needs --to, an absolute directory or s3://bucket/prefix/")
	}
	if rest, ok := strings.CutPrefix(to, "s3://"); ok {
		bucket, prefix, _ := strings.Cut(rest, "/")
		if !validBucket(bucket) {
			return Target{}, fmt.Errorf("--to %s: %q is not a bucket name (3 to 63 lowercase letters, digits, dots and hyphens); write s3://bucket/prefix/", to, bucket)
		}
		if prefix != "" {
			if !strings.HasSuffix(prefix, "/") {
				return Target{}, fmt.Errorf("--to %s: the prefix must end with \"/\", as in s3://%s/%s/", to, bucket, prefix)
			}
			if !objstore.ValidKey(strings.TrimSuffix(prefix, "/")) {
				return Target{}, fmt.Errorf("--to %s: the prefix %q has an empty, \".\" or \"..\" part", to, prefix)
			}
		}
		return Target{To: to, Bucket: bucket, Prefix: prefix}, nil
	}
	if !filepath.IsAbs(to) {
		return Target{}, fmt.Errorf("--to %s is neither an absolute directory nor s3://bucket/prefix/", to)
	}
	return Target{To: to, Dir: filepath.Clean(to)}, nil
}

func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// OpenDir checks that the directory exists and that this process may
// write in it, before anything is written, and returns the store over it.
// Files are written as objstore.Dir writes objects: under a temporary name
// in the same folder, synced, linked to their name, the folder synced.
func OpenDir(dir string) (*objstore.Dir, error) {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("--to %s: the directory does not exist; make it first, writable by the account that runs the export (install -d -m 0700 -o vcon -g vcon %s)", dir, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("--to %s: %w", dir, unwrapPath(err))
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("--to %s is not a directory", dir)
	}
	if err := syscall.Access(dir, 0x2|0x1); err != nil { // W_OK|X_OK
		return nil, fmt.Errorf("--to %s: this account may not write in the directory (%v); run the export as the account that owns it, or choose another directory", dir, err)
	}
	return objstore.NewDir(dir)
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// OpenBucket makes the store of t's bucket and prefix with client,
// spooling uploads above objstore's memory bound in spoolDir, sealed
// under a key that never leaves the process (docs/FORMAT.md). Before anything is written it refuses a
// bucket with Object Lock or versioning, whose bytes an export removed
// from it would outlive, and a bucket it cannot list. A key that may not
// read those settings is not refused for that: the export needs only
// s3:PutObject, s3:ListBucket and s3:DeleteObject.
func OpenBucket(ctx context.Context, client *s3sig.Client, t Target, spoolDir string) (*objstore.S3, error) {
	s := objstore.NewS3(client, t.Bucket, t.Prefix, spoolDir)
	if err := checkBucket(ctx, s, t.Bucket); err != nil {
		return nil, err
	}
	return s, nil
}

// errStop ends a listing after its first object.
var errStop = errors.New("stop")

func checkBucket(ctx context.Context, s *objstore.S3, bucket string) error {
	// Object Lock first: a bucket with it always has versioning on too,
	// and the operator must see why it is refused.
	locked, err := s.ObjectLock(ctx)
	if err != nil && !unreadable(err) {
		return bucketErr(bucket, "reading its Object Lock setting", err)
	}
	if err == nil && locked {
		return fmt.Errorf("the export cannot use bucket %q: it has Object Lock on, which can refuse to delete an export's files, when an export fails or when old exports are removed on the tenant's retention schedule; use a bucket made without Object Lock", bucket)
	}
	status, err := s.Versioning(ctx)
	if err != nil && !unreadable(err) {
		return bucketErr(bucket, "reading its versioning", err)
	}
	if err == nil && status != "" {
		return fmt.Errorf("the export cannot use bucket %q: it has versioning %s, which keeps a deleted file's bytes as an earlier version, so an export removed from it is not gone; use a bucket whose versioning was never turned on", bucket, status)
	}
	err = s.List(ctx, "", func(objstore.Info) error { return errStop })
	if err != nil && !errors.Is(err, errStop) {
		return bucketErr(bucket, "listing it", err)
	}
	return nil
}

// unreadable reports an answer that only says the key may not read a
// bucket setting, or that the service does not offer it.
func unreadable(err error) bool {
	var se *s3sig.Error
	return errors.Is(err, s3sig.ErrAccessDenied) || (errors.As(err, &se) && se.StatusCode == http.StatusNotImplemented)
}

func bucketErr(bucket, op string, err error) error {
	switch {
	case errors.Is(err, s3sig.ErrNoSuchBucket):
		return fmt.Errorf("the export cannot use bucket %q: it does not exist; make it first, without versioning and without Object Lock", bucket)
	case errors.Is(err, s3sig.ErrAccessDenied):
		return fmt.Errorf("the export cannot use bucket %q: %s was refused (%v); the key needs s3:PutObject, s3:ListBucket and s3:DeleteObject on the bucket", bucket, op, err)
	}
	return fmt.Errorf("the export cannot use bucket %q: %s failed: %w", bucket, op, err)
}

package objstore

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/vcon-server/vcon-server/internal/s3sig"
)

// S3 keeps objects in a bucket, each key under a prefix. It is safe for
// concurrent use.
type S3 struct {
	c        *s3sig.Client
	bucket   string
	prefix   string
	spoolDir string
	// batchRefused is set once the server refused DeleteObjects: it is
	// not asked again by this process (deletemany.go).
	batchRefused atomic.Bool
}

// NewS3 returns the store of bucket through c. Keys live under prefix,
// which is "" or ends with "/" (one is added if it lacks it). An upload is
// held in memory, or above 1 MiB in a sealed spool file in spoolDir (the
// system's temporary folder when ""), so a PutObject knows its length and
// hash before it starts and can be sent again whole on a retry.
func NewS3(c *s3sig.Client, bucket, prefix, spoolDir string) *S3 {
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &S3{c: c, bucket: bucket, prefix: prefix, spoolDir: spoolDir}
}

// String names the bucket (and prefix) for operators; never a key.
func (s *S3) String() string {
	if s.prefix == "" {
		return fmt.Sprintf("bucket %q", s.bucket)
	}
	return fmt.Sprintf("bucket %q prefix %q", s.bucket, s.prefix)
}

// Versioning returns the bucket's versioning status: "" when it was never
// turned on, s3sig.VersioningEnabled or s3sig.VersioningSuspended. The
// server's start refuses a versioned bucket where a deleted object's bytes
// must really go (docs/FORMAT.md).
func (s *S3) Versioning(ctx context.Context) (string, error) {
	return s.c.GetBucketVersioning(ctx, s.bucket)
}

// ObjectLock reports whether the bucket has Object Lock on.
func (s *S3) ObjectLock(ctx context.Context) (bool, error) {
	return s.c.GetObjectLockConfiguration(ctx, s.bucket)
}

func (s *S3) key(key string) (string, error) {
	if !ValidKey(key) {
		return "", errBadKey
	}
	return s.prefix + key, nil
}

// notFound maps the client's "no such key" to ErrNotFound. Other errors,
// a missing bucket among them, stay as they are: a wrong bucket must not
// pass for an empty one.
func notFound(err error) error {
	if errors.Is(err, s3sig.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

func (s *S3) Upload(ctx context.Context, key string, createOnly bool) (Upload, error) {
	full, err := s.key(key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &s3Upload{s: s, ctx: ctx, key: full, createOnly: createOnly,
		body: newUploadBody(s.spoolDir), sha: sha256.New(), md5: md5.New()}, nil
}

type s3Upload struct {
	s          *S3
	ctx        context.Context
	key        string
	createOnly bool
	body       *uploadBody // nil once the upload ended
	sha, md5   hash.Hash
	n          int64
	err        error // the first write error, returned by Commit too
	done       bool
}

var errUploadEnded = errors.New("objstore: upload already committed or aborted")

func (u *s3Upload) Write(p []byte) (int, error) {
	if u.done {
		return 0, errUploadEnded
	}
	if u.err != nil {
		return 0, u.err
	}
	n, err := u.body.Write(p)
	u.sha.Write(p[:n])
	u.md5.Write(p[:n])
	u.n += int64(n)
	if err != nil {
		u.err = err
		return n, u.err
	}
	return n, nil
}

func (u *s3Upload) Commit() error {
	if u.done {
		return errUploadEnded
	}
	defer u.Abort()
	if u.err != nil {
		return u.err
	}
	// The payload hash is signed, so the bucket checks that it stored
	// exactly the bytes written; the client rewinds the body on retries.
	_, err := u.s.c.PutObject(u.ctx, u.s.bucket, u.key, u.body.reader(), u.n, s3sig.PutOptions{
		IfNoneMatch: u.createOnly,
		SHA256:      hex.EncodeToString(u.sha.Sum(nil)),
	})
	if err == nil {
		u.done = true
		return nil
	}
	if !errors.Is(err, s3sig.ErrPreconditionFailed) {
		return err
	}
	var se *s3sig.Error
	if errors.As(err, &se) && se.Attempts > 1 {
		// An earlier attempt may have stored our bytes and lost its
		// answer, and the retry found them: then the object is ours.
		own, herr := u.ownObject()
		if herr != nil {
			return fmt.Errorf("objstore: a retried create-only put found the name taken, and reading it back failed: %w", herr)
		}
		if own {
			u.done = true
			return nil
		}
	}
	return ErrExists
}

// ownObject reports whether the object now under the key has the bytes
// this upload sent: its ETag is the MD5 of a single-part upload on AWS,
// MinIO and versitygw. Sealed bytes are unique (fresh data key, random
// nonces), so equal bytes mean this upload wrote them.
func (u *s3Upload) ownObject() (bool, error) {
	info, err := u.s.c.HeadObject(u.ctx, u.s.bucket, u.key)
	if err != nil {
		return false, err
	}
	return strings.Trim(info.ETag, `"`) == hex.EncodeToString(u.md5.Sum(nil)), nil
}

// Abort frees the buffer or spool file; after Commit it does nothing
// more. The client reads the body only while PutObject runs (an attempt's
// body is detached when it ends), so the buffer can go back to its pool.
func (u *s3Upload) Abort() {
	if u.body != nil {
		u.body.release()
		u.body = nil
	}
	u.done = true
}

func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	full, err := s.key(key)
	if err != nil {
		return nil, err
	}
	r, err := s.c.GetObject(ctx, s.bucket, full, s3sig.GetOptions{})
	if err != nil {
		return nil, notFound(err)
	}
	return r.Body, nil
}

func (s *S3) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("objstore: negative range %d+%d", off, n)
	}
	full, err := s.key(key)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		// No Range header can ask for nothing; a Stat still says whether
		// the object exists.
		if _, err := s.Stat(ctx, key); err != nil {
			return nil, err
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	r, err := s.c.GetObject(ctx, s.bucket, full, s3sig.GetOptions{Range: s3sig.ByteRange(off, n)})
	var se *s3sig.Error
	if errors.As(err, &se) && se.StatusCode == http.StatusRequestedRangeNotSatisfiable {
		// The object exists and the range starts at or past its end (an
		// empty object has no satisfiable range at all): fewer bytes than
		// asked, none here, as the contract says.
		return io.NopCloser(strings.NewReader("")), nil
	}
	if err != nil {
		return nil, notFound(err)
	}
	if r.StatusCode == http.StatusPartialContent {
		return readCloser{io.LimitReader(r.Body, n), r.Body}, nil
	}
	// 200: the server sent the whole object (servers may ignore a range,
	// MinIO does for an empty object). Skip to off and stop after n.
	if _, err := io.CopyN(io.Discard, r.Body, off); err != nil && err != io.EOF {
		r.Body.Close()
		return nil, fmt.Errorf("objstore: get range: %w", err)
	}
	return readCloser{io.LimitReader(r.Body, n), r.Body}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

func (s *S3) Stat(ctx context.Context, key string) (Info, error) {
	full, err := s.key(key)
	if err != nil {
		return Info{}, err
	}
	info, err := s.c.HeadObject(ctx, s.bucket, full)
	if err != nil {
		return Info{}, notFound(err)
	}
	return Info{Key: key, Size: info.Size, Modified: info.LastModified}, nil
}

func (s *S3) Delete(ctx context.Context, key string) error {
	full, err := s.key(key)
	if err != nil {
		return err
	}
	// S3 answers 204 for a missing key; a server that says 404 NoSuchKey
	// means the same.
	if err := s.c.DeleteObject(ctx, s.bucket, full); err != nil && !errors.Is(err, s3sig.ErrNotFound) {
		return err
	}
	return nil
}

// List follows the bucket's listing pages. Keys come in UTF-8 binary
// order, which is lexical order within every folder. A key under the
// prefix that is not a valid store key (a "folder/" marker some tools
// create) is not an object of this store and is skipped.
func (s *S3) List(ctx context.Context, prefix string, fn func(Info) error) error {
	if strings.HasPrefix(prefix, "/") {
		return errors.New("objstore: invalid list prefix")
	}
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 && !ValidKey(prefix[:i]) {
		return errors.New("objstore: invalid list prefix")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.c.ListAll(ctx, s.bucket, s.prefix+prefix, func(o s3sig.Object) error {
		key := strings.TrimPrefix(o.Key, s.prefix)
		if !ValidKey(key) {
			return nil
		}
		return fn(Info{Key: key, Size: o.Size, Modified: o.LastModified})
	})
}

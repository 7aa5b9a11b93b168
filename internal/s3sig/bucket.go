package s3sig

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
)

// Bucket versioning states as GetBucketVersioning reports them. A bucket
// whose versioning was never turned on reports "".
const (
	VersioningEnabled   = "Enabled"
	VersioningSuspended = "Suspended"
)

// GetBucketVersioning returns the bucket's versioning status: "" (never
// turned on), VersioningEnabled or VersioningSuspended.
func (c *Client) GetBucketVersioning(ctx context.Context, bucket string) (string, error) {
	// "?versioning" is signed as "versioning=": Query writes the "=".
	resp, err := c.do(ctx, &request{op: "get bucket versioning", method: http.MethodGet, bucket: bucket, query: Query("versioning", "")})
	if err != nil {
		return "", err
	}
	b, err := readBody("get bucket versioning", resp)
	if err != nil {
		return "", err
	}
	return parseVersioning(b)
}

// GetObjectLockConfiguration reports whether the bucket has Object Lock
// on. A 404 ObjectLockConfigurationNotFoundError and a 200 with an empty
// configuration both mean it has not.
func (c *Client) GetObjectLockConfiguration(ctx context.Context, bucket string) (bool, error) {
	resp, err := c.do(ctx, &request{op: "get object lock configuration", method: http.MethodGet, bucket: bucket, query: Query("object-lock", "")})
	var se *Error
	if errors.As(err, &se) && se.StatusCode == http.StatusNotFound && se.Code == "ObjectLockConfigurationNotFoundError" {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	b, err := readBody("get object lock configuration", resp)
	if err != nil {
		return false, err
	}
	return parseObjectLock(b)
}

// Ping checks that the service answers and takes the keys, by listing the
// buckets (the answer is not read).
func (c *Client) Ping(ctx context.Context) error {
	resp, err := c.do(ctx, &request{op: "list buckets", method: http.MethodGet})
	if err != nil {
		return err
	}
	drain(resp)
	return nil
}

// CreateBucketOptions are the optional parts of a CreateBucket.
type CreateBucketOptions struct {
	// ObjectLock creates the bucket with Object Lock on (which also turns
	// versioning on); it can only be chosen at creation.
	ObjectLock bool
}

// CreateBucket makes a bucket (tests and scripts; the server never makes
// its own bucket).
func (c *Client) CreateBucket(ctx context.Context, bucket string, opts CreateBucketOptions) error {
	h := http.Header{}
	if opts.ObjectLock {
		h.Set("X-Amz-Bucket-Object-Lock-Enabled", "true")
	}
	var body []byte
	// us-east-1 is the default location and AWS refuses it named.
	if r := c.signer.Region; r != "us-east-1" {
		body = []byte(`<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><LocationConstraint>` +
			r + `</LocationConstraint></CreateBucketConfiguration>`)
	}
	return c.putBucket(ctx, "create bucket", bucket, "", h, body)
}

// PutBucketVersioning sets the bucket's versioning to VersioningEnabled
// or VersioningSuspended (tests and scripts).
func (c *Client) PutBucketVersioning(ctx context.Context, bucket, status string) error {
	if status != VersioningEnabled && status != VersioningSuspended {
		return fmt.Errorf("s3: put bucket versioning: status %q: want Enabled or Suspended", status)
	}
	body := []byte(`<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>` +
		status + `</Status></VersioningConfiguration>`)
	return c.putBucket(ctx, "put bucket versioning", bucket, Query("versioning", ""), http.Header{}, body)
}

func (c *Client) putBucket(ctx context.Context, op, bucket, query string, h http.Header, body []byte) error {
	r := &request{op: op, method: http.MethodPut, bucket: bucket, query: query, header: h}
	if body != nil {
		sum := sha256.Sum256(body)
		r.body, r.size, r.payload = bytes.NewReader(body), int64(len(body)), hex.EncodeToString(sum[:])
		h.Set("Content-Type", "application/xml")
		// AWS requires Content-MD5 on some bucket configuration puts; it
		// costs nothing to send on all of them.
		md := md5.Sum(body)
		h.Set("Content-Md5", base64.StdEncoding.EncodeToString(md[:]))
	}
	resp, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	drain(resp)
	return nil
}

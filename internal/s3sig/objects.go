package s3sig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// PutOptions are the optional parts of a PutObject.
type PutOptions struct {
	// IfNoneMatch sends If-None-Match: *, so the put fails with
	// ErrPreconditionFailed (412) when the key already names an object.
	IfNoneMatch bool
	// SHA256 is the body's hex SHA-256 when the caller knows it. It is
	// signed, and the server checks the body against it; without it the
	// body is sent as UnsignedPayload over TLS (hashed here over HTTP).
	SHA256      string
	ContentType string
}

// PutResult is what a successful PutObject tells.
type PutResult struct {
	ETag string
}

// PutObject writes size bytes read from body (from its current offset)
// under key. The body is rewound and sent again on each retry, so it must
// not change while the call runs.
//
// With IfNoneMatch, a retry after an attempt that may have reached the
// server (a lost answer, a 5xx) can answer 412 for the client's own
// write; err.(*Error).Attempts > 1 says the answer came on a retry, and a
// caller that cares compares the object's ETag with its own.
func (c *Client) PutObject(ctx context.Context, bucket, key string, body io.ReadSeeker, size int64, opts PutOptions) (PutResult, error) {
	if size < 0 {
		return PutResult{}, errors.New("s3: put object: negative size")
	}
	h := http.Header{}
	if opts.IfNoneMatch {
		h.Set("If-None-Match", "*")
	}
	if opts.ContentType != "" {
		h.Set("Content-Type", opts.ContentType)
	}
	resp, err := c.do(ctx, &request{
		op: "put object", method: http.MethodPut, bucket: bucket, key: key,
		header: h, body: body, size: size, payload: opts.SHA256,
	})
	if err != nil {
		return PutResult{}, err
	}
	drain(resp)
	return PutResult{ETag: resp.Header.Get("ETag")}, nil
}

// GetOptions are the optional parts of a GetObject.
type GetOptions struct {
	// Range is a Range header value, "bytes=0-9" (see ByteRange).
	Range string
}

// ByteRange is the Range header for n bytes from off (n > 0). When the
// last offset would overflow, the range runs to the end of the object.
func ByteRange(off, n int64) string {
	if off+n-1 < off {
		return "bytes=" + strconv.FormatInt(off, 10) + "-"
	}
	return "bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(off+n-1, 10)
}

// GetResult is an object being read. The caller closes Body.
type GetResult struct {
	Body io.ReadCloser
	// StatusCode is 206 when the server honoured a Range and 200 when it
	// sent the whole object (some servers ignore ranges they dislike).
	StatusCode    int
	ContentLength int64 // -1 when not told
	ContentRange  string
	ETag          string
	LastModified  time.Time
}

// GetObject reads key. A range past the end of the object is an *Error
// with status 416 (InvalidRange); a missing key is ErrNotFound.
func (c *Client) GetObject(ctx context.Context, bucket, key string, opts GetOptions) (*GetResult, error) {
	h := http.Header{}
	if opts.Range != "" {
		h.Set("Range", opts.Range)
	}
	resp, err := c.do(ctx, &request{
		op: "get object", method: http.MethodGet, bucket: bucket, key: key,
		header: h, ok: []int{http.StatusPartialContent},
	})
	if err != nil {
		return nil, err
	}
	lm, _ := http.ParseTime(resp.Header.Get("Last-Modified"))
	return &GetResult{
		Body:          resp.Body,
		StatusCode:    resp.StatusCode,
		ContentLength: resp.ContentLength,
		ContentRange:  resp.Header.Get("Content-Range"),
		ETag:          resp.Header.Get("ETag"),
		LastModified:  lm,
	}, nil
}

// ObjectInfo is what HeadObject tells.
type ObjectInfo struct {
	Size         int64
	LastModified time.Time
	ETag         string
}

// HeadObject reads key's size and times; ErrNotFound when it is missing.
func (c *Client) HeadObject(ctx context.Context, bucket, key string) (ObjectInfo, error) {
	resp, err := c.do(ctx, &request{op: "head object", method: http.MethodHead, bucket: bucket, key: key})
	if err != nil {
		return ObjectInfo{}, err
	}
	resp.Body.Close()
	if resp.ContentLength < 0 {
		return ObjectInfo{}, errors.New("s3: head object: the answer has no Content-Length")
	}
	lm, _ := http.ParseTime(resp.Header.Get("Last-Modified"))
	return ObjectInfo{Size: resp.ContentLength, LastModified: lm, ETag: resp.Header.Get("ETag")}, nil
}

// DeleteObject removes key. S3 answers 204 for a missing key too; a server
// that answers 404 NoSuchKey instead returns ErrNotFound, which callers
// that do not care ignore.
func (c *Client) DeleteObject(ctx context.Context, bucket, key string) error {
	resp, err := c.do(ctx, &request{
		op: "delete object", method: http.MethodDelete, bucket: bucket, key: key,
		ok: []int{http.StatusNoContent},
	})
	if err != nil {
		return err
	}
	drain(resp)
	return nil
}

// ListInput selects one ListObjectsV2 page.
type ListInput struct {
	Prefix            string
	ContinuationToken string
	StartAfter        string
	MaxKeys           int // the server's default (1,000) when zero
}

// ListObjectsV2 reads one page of the keys under in.Prefix, in UTF-8
// binary order.
func (c *Client) ListObjectsV2(ctx context.Context, bucket string, in ListInput) (*ListPage, error) {
	kv := []string{"list-type", "2"}
	if in.Prefix != "" {
		kv = append(kv, "prefix", in.Prefix)
	}
	if in.ContinuationToken != "" {
		kv = append(kv, "continuation-token", in.ContinuationToken)
	}
	if in.StartAfter != "" {
		kv = append(kv, "start-after", in.StartAfter)
	}
	if in.MaxKeys > 0 {
		kv = append(kv, "max-keys", strconv.Itoa(in.MaxKeys))
	}
	resp, err := c.do(ctx, &request{op: "list objects", method: http.MethodGet, bucket: bucket, query: Query(kv...)})
	if err != nil {
		return nil, err
	}
	b, err := readBody("list objects", resp)
	if err != nil {
		return nil, err
	}
	return parseList(b)
}

// ListAll calls fn for every object under prefix, following continuation
// tokens until a page says it is the last. A page may be empty and still
// not the last (MinIO sends such pages), so only IsTruncated ends the
// loop. An error from fn stops it and is returned as it is.
func (c *Client) ListAll(ctx context.Context, bucket, prefix string, fn func(Object) error) error {
	in := ListInput{Prefix: prefix}
	seen := map[string]bool{}
	for {
		page, err := c.ListObjectsV2(ctx, bucket, in)
		if err != nil {
			return err
		}
		for _, o := range page.Objects {
			if err := fn(o); err != nil {
				return err
			}
		}
		if !page.IsTruncated {
			return nil
		}
		tok := page.NextContinuationToken
		// A truncated page without a new token would list the same page
		// for ever.
		if tok == "" || seen[tok] {
			return fmt.Errorf("s3: list objects: the server said more keys follow but gave no new continuation token")
		}
		seen[tok] = true
		in.ContinuationToken = tok
	}
}

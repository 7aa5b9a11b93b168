package s3sig_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/s3sig"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestObjects runs every object call against each real server.
func TestObjects(t *testing.T) {
	s3test.ForEach(t, func(t *testing.T, srv *s3test.Server) {
		ctx := ctxT(t)
		c := srv.Client(t)
		bucket := srv.NewBucket(t, false)
		key := "tenants/0b6f3f5e-1d2c-4c1e-9a55-2f1f3c1b2a10/objects/a b+c=d/é"
		body := []byte("0123456789abcdef")

		if _, err := c.PutObject(ctx, bucket, key, bytes.NewReader(body), int64(len(body)), s3sig.PutOptions{SHA256: sha(body)}); err != nil {
			t.Fatal(err)
		}
		// Without a hash the body goes as UNSIGNED-PAYLOAD over TLS.
		if _, err := c.PutObject(ctx, bucket, key+"2", bytes.NewReader(body), int64(len(body)), s3sig.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		// A wrong hash must be refused: the server checks the signed hash.
		_, err := c.PutObject(ctx, bucket, key+"3", bytes.NewReader(body), int64(len(body)), s3sig.PutOptions{SHA256: sha([]byte("other"))})
		var se *s3sig.Error
		if !errors.As(err, &se) || se.StatusCode != http.StatusBadRequest {
			t.Errorf("put with a wrong payload hash: %v, want a 400", err)
		}
		// If-None-Match: * on a taken key.
		_, err = c.PutObject(ctx, bucket, key, bytes.NewReader(body), int64(len(body)), s3sig.PutOptions{IfNoneMatch: true})
		if !errors.Is(err, s3sig.ErrPreconditionFailed) {
			t.Errorf("create-only put on a taken key: %v, want ErrPreconditionFailed", err)
		} else if strings.Contains(err.Error(), "tenants") || strings.Contains(err.Error(), "0b6f3f5e") {
			t.Errorf("error text names the key: %v", err)
		}
		// A zero-length object.
		if _, err := c.PutObject(ctx, bucket, "empty", bytes.NewReader(nil), 0, s3sig.PutOptions{IfNoneMatch: true}); err != nil {
			t.Fatal(err)
		}

		g, err := c.GetObject(ctx, bucket, key, s3sig.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(g.Body)
		g.Body.Close()
		if !bytes.Equal(got, body) || g.StatusCode != 200 {
			t.Errorf("get: %d %q", g.StatusCode, got)
		}
		g, err = c.GetObject(ctx, bucket, key, s3sig.GetOptions{Range: s3sig.ByteRange(3, 4)})
		if err != nil {
			t.Fatal(err)
		}
		got, _ = io.ReadAll(g.Body)
		g.Body.Close()
		if string(got) != "3456" || g.StatusCode != http.StatusPartialContent {
			t.Errorf("ranged get: %d %q", g.StatusCode, got)
		}
		_, err = c.GetObject(ctx, bucket, key, s3sig.GetOptions{Range: s3sig.ByteRange(100, 4)})
		if !errors.As(err, &se) || se.StatusCode != http.StatusRequestedRangeNotSatisfiable {
			t.Errorf("range past the end: %v, want 416", err)
		}

		info, err := c.HeadObject(ctx, bucket, key)
		if err != nil || info.Size != int64(len(body)) || info.LastModified.IsZero() || info.ETag == "" {
			t.Errorf("head: %+v %v", info, err)
		}
		_, err = c.HeadObject(ctx, bucket, "missing/key")
		if !errors.Is(err, s3sig.ErrNotFound) {
			t.Errorf("head of a missing key: %v, want ErrNotFound", err)
		}
		_, err = c.GetObject(ctx, bucket, "missing/key", s3sig.GetOptions{})
		if !errors.Is(err, s3sig.ErrNotFound) {
			t.Errorf("get of a missing key: %v, want ErrNotFound", err)
		}
		_, err = c.HeadObject(ctx, "vcon-no-such-bucket", "x")
		if err == nil {
			t.Errorf("head in a missing bucket succeeded")
		}
		_, err = c.GetObject(ctx, "vcon-no-such-bucket", "x", s3sig.GetOptions{})
		if errors.Is(err, s3sig.ErrNotFound) || !errors.Is(err, s3sig.ErrNoSuchBucket) {
			t.Errorf("get in a missing bucket: %v, want ErrNoSuchBucket and not ErrNotFound", err)
		}

		var keys []string
		if err := c.ListAll(ctx, bucket, "tenants/", func(o s3sig.Object) error {
			keys = append(keys, o.Key)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if want := []string{key, key + "2"}; fmt.Sprint(keys) != fmt.Sprint(want) {
			t.Errorf("list: %q, want %q", keys, want)
		}

		if err := c.DeleteObject(ctx, bucket, key); err != nil {
			t.Fatal(err)
		}
		if err := c.DeleteObject(ctx, bucket, key); err != nil && !errors.Is(err, s3sig.ErrNotFound) {
			t.Errorf("delete of a missing key: %v", err)
		}
		if _, err := c.HeadObject(ctx, bucket, key); !errors.Is(err, s3sig.ErrNotFound) {
			t.Errorf("head after delete: %v", err)
		}
	})
}

// TestListPages lists with small pages, so continuation tokens carry
// keys with "/" and "=" (versitygw's tokens are the last key in clear).
func TestListPages(t *testing.T) {
	s3test.ForEach(t, func(t *testing.T, srv *s3test.Server) {
		ctx := ctxT(t)
		c := srv.Client(t)
		bucket := srv.NewBucket(t, false)
		var want []string
		for i := 0; i < 7; i++ {
			k := fmt.Sprintf("p/x=%d/k+%d", i, i)
			want = append(want, k)
			if _, err := c.PutObject(ctx, bucket, k, strings.NewReader("x"), 1, s3sig.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		in := s3sig.ListInput{Prefix: "p/", MaxKeys: 2}
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("too many pages")
			}
			page, err := c.ListObjectsV2(ctx, bucket, in)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range page.Objects {
				got = append(got, o.Key)
			}
			if !page.IsTruncated {
				break
			}
			in.ContinuationToken = page.NextContinuationToken
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("pages: %q, want %q", got, want)
		}
	})
}

func TestBucketSettings(t *testing.T) {
	s3test.ForEach(t, func(t *testing.T, srv *s3test.Server) {
		ctx := ctxT(t)
		c := srv.Client(t)
		plain := srv.NewBucket(t, false)
		versioned := srv.NewBucket(t, true)
		for _, tc := range []struct{ bucket, want string }{{plain, ""}, {versioned, s3sig.VersioningEnabled}} {
			got, err := c.GetBucketVersioning(ctx, tc.bucket)
			if err != nil || got != tc.want {
				t.Errorf("versioning: %q %v, want %q", got, err, tc.want)
			}
		}
		if err := c.PutBucketVersioning(ctx, versioned, s3sig.VersioningSuspended); err != nil {
			t.Fatal(err)
		}
		if got, err := c.GetBucketVersioning(ctx, versioned); err != nil || got != s3sig.VersioningSuspended {
			t.Errorf("versioning after suspending: %q %v", got, err)
		}
		for _, b := range []string{plain, versioned} {
			if locked, err := c.GetObjectLockConfiguration(ctx, b); err != nil || locked {
				t.Errorf("object lock of a bucket made without it: %v %v", locked, err)
			}
		}
		locked := srv.NewLockedBucket(t)
		if on, err := c.GetObjectLockConfiguration(ctx, locked); err != nil || !on {
			t.Errorf("object lock of a locked bucket: %v %v", on, err)
		}
		if v, err := c.GetBucketVersioning(ctx, locked); err != nil || v != s3sig.VersioningEnabled {
			t.Errorf("versioning of a locked bucket: %q %v", v, err)
		}
	})
}

// TestBadSignatureIsAnError checks that a wrong secret is refused and that
// the answer reads as an S3 error, not a transport failure.
func TestBadSignatureIsAnError(t *testing.T) {
	srv := s3test.Start(t, "versitygw")
	c, err := s3sig.New(s3sig.Config{
		Endpoint:    srv.Endpoint,
		Credentials: s3sig.Credentials{AccessKeyID: srv.AccessKey, SecretAccessKey: "wrong"},
		PathStyle:   true,
		CAPEM:       srv.CAPEM,
	})
	if err != nil {
		t.Fatal(err)
	}
	bucket := srv.NewBucket(t, false)
	_, err = c.HeadObject(ctxT(t), bucket, "k")
	var se *s3sig.Error
	if !errors.As(err, &se) || se.StatusCode != http.StatusForbidden || se.Attempts != 1 {
		t.Fatalf("head with a wrong secret: %#v, want one 403", err)
	}
	_, err = c.GetObject(ctxT(t), bucket, "k", s3sig.GetOptions{})
	if !errors.As(err, &se) || se.Code != "SignatureDoesNotMatch" {
		t.Fatalf("get with a wrong secret: %v, want SignatureDoesNotMatch", err)
	}
}

// TestUnknownCA checks that a server whose certificate the configured CA
// did not sign is refused at once, not retried.
func TestUnknownCA(t *testing.T) {
	srv := s3test.Start(t, "versitygw")
	other := s3test.Start(t, "versitygw")
	c, err := s3sig.New(s3sig.Config{
		Endpoint:    srv.Endpoint,
		Credentials: s3sig.Credentials{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey},
		PathStyle:   true,
		CAPEM:       other.CAPEM,
		RetryBase:   time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Ping(ctxT(t)); err == nil {
		t.Fatal("a server signed by another CA was accepted")
	}
	if d := time.Since(start); d > 900*time.Millisecond {
		t.Errorf("a certificate error was retried (%v)", d)
	}
}

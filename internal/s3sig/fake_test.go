package s3sig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fake answers with canned documents; it records the requests it saw.
type fake struct {
	mu      sync.Mutex
	reqs    []*http.Request
	handler func(w http.ResponseWriter, r *http.Request, n int)
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	n := len(f.reqs)
	f.mu.Unlock()
	f.handler(w, r, n)
}

// requests returns what the fake saw so far.
func (f *fake) requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.reqs...)
}

func newFake(t *testing.T, h func(w http.ResponseWriter, r *http.Request, n int)) (*fake, *Client) {
	t.Helper()
	f := &fake{handler: h}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := New(Config{
		Endpoint:    srv.URL,
		Credentials: Credentials{AccessKeyID: "AKID", SecretAccessKey: "secret"},
		PathStyle:   true,
		RetryBase:   time.Millisecond,
		RetryMax:    5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

func TestObjectLockAnswers(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		want   bool
		err    bool
	}{
		{"not found", 404, `<Error><Code>ObjectLockConfigurationNotFoundError</Code><Message>Object Lock configuration does not exist for this bucket</Message></Error>`, false, false},
		{"empty 200", 200, ``, false, false},
		{"empty configuration", 200, `<?xml version="1.0" encoding="UTF-8"?><ObjectLockConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"/>`, false, false},
		{"enabled without xmlns", 200, `<?xml version="1.0" encoding="UTF-8"?><ObjectLockConfiguration><ObjectLockEnabled>Enabled</ObjectLockEnabled><Rule></Rule></ObjectLockConfiguration>`, true, false},
		{"enabled with xmlns", 200, `<ObjectLockConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><ObjectLockEnabled>Enabled</ObjectLockEnabled></ObjectLockConfiguration>`, true, false},
		{"no such bucket", 404, `<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message></Error>`, false, true},
		{"denied", 403, `<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			got, err := c.GetObjectLockConfiguration(context.Background(), "b")
			if got != tc.want || (err != nil) != tc.err {
				t.Errorf("got %v, %v; want %v, error %v", got, err, tc.want, tc.err)
			}
			if q := f.requests()[0].URL.RawQuery; q != "object-lock=" {
				t.Errorf("query %q, want object-lock=", q)
			}
		})
	}
}

func TestVersioningAnswers(t *testing.T) {
	for body, want := range map[string]string{
		`<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"/>`:                                                  "",
		`<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>Enabled</Status></VersioningConfiguration>`: "Enabled",
		`<VersioningConfiguration><Status>Suspended</Status><MfaDelete>Disabled</MfaDelete></VersioningConfiguration>`:                "Suspended",
	} {
		_, c := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) { io.WriteString(w, body) })
		got, err := c.GetBucketVersioning(context.Background(), "b")
		if err != nil || got != want {
			t.Errorf("%s: got %q %v, want %q", body, got, err, want)
		}
	}
	_, c := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		io.WriteString(w, `<VersioningConfiguration><Status>Maybe</Status></VersioningConfiguration>`)
	})
	if _, err := c.GetBucketVersioning(context.Background(), "b"); err == nil {
		t.Error("an unknown status was accepted")
	}
}

// TestListAllEmptyTruncatedPage follows MinIO's habit of sending an empty
// page that says more follow before the last one.
func TestListAllEmptyTruncatedPage(t *testing.T) {
	page := func(token, next string, truncated bool, keys ...string) string {
		var b strings.Builder
		fmt.Fprintf(&b, `<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><IsTruncated>%v</IsTruncated>`, truncated)
		if next != "" {
			fmt.Fprintf(&b, `<NextContinuationToken>%s</NextContinuationToken>`, next)
		}
		for _, k := range keys {
			fmt.Fprintf(&b, `<Contents><Key>%s</Key><Size>3</Size><LastModified>2024-05-01T10:00:00.000Z</LastModified><ETag>"x"</ETag></Contents>`, k)
		}
		b.WriteString(`</ListBucketResult>`)
		return b.String()
	}
	f, c := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch r.URL.Query().Get("continuation-token") {
		case "":
			io.WriteString(w, page("", "t1==", true, "p/a", "p/b"))
		case "t1==":
			io.WriteString(w, page("t1==", "t/2", true))
		case "t/2":
			io.WriteString(w, page("t/2", "", false, "p/c"))
		default:
			w.WriteHeader(400)
		}
	})
	var keys []string
	err := c.ListAll(context.Background(), "b", "p/", func(o Object) error {
		keys = append(keys, o.Key)
		if o.Size != 3 || o.LastModified.IsZero() {
			t.Errorf("object %+v", o)
		}
		return nil
	})
	if err != nil || strings.Join(keys, ",") != "p/a,p/b,p/c" {
		t.Fatalf("keys %v, %v", keys, err)
	}
	if q := f.requests()[1].URL.RawQuery; q != "continuation-token=t1%3D%3D&list-type=2&prefix=p%2F" {
		t.Errorf("second page query %q", q)
	}

	// A truncated page without a token would loop for ever.
	_, c = newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		io.WriteString(w, page("", "", true, "p/a"))
	})
	if err := c.ListAll(context.Background(), "b", "", func(Object) error { return nil }); err == nil {
		t.Error("a truncated page without a token was accepted")
	}
}

func TestErrorText(t *testing.T) {
	key := "tenants/0b6f3f5e-1d2c-4c1e-9a55-2f1f3c1b2a10/objects/0190f0c2-aaaa-7bbb-8ccc-dddddddddddd"
	_, c := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("X-Amz-Request-Id", "hdr-id")
		switch {
		case r.Method == http.MethodHead:
			w.WriteHeader(404)
		case strings.HasSuffix(r.URL.Path, "/quoted"):
			w.WriteHeader(400)
			io.WriteString(w, `<Error><Code>InvalidArgument</Code><Message>Object name `+key+`/quoted contains unsupported characters; tenant 0b6f3f5e-1d2c-4c1e-9a55-2f1f3c1b2a10</Message><Key>`+key+`</Key><RequestId>r2</RequestId></Error>`)
		default:
			w.WriteHeader(404)
			io.WriteString(w, `<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message><Key>`+key+`</Key><RequestId>r1</RequestId></Error>`)
		}
	})
	ctx := context.Background()
	_, err := c.GetObject(ctx, "b", key, GetOptions{})
	if !errors.Is(err, ErrNotFound) || err.Error() != "s3: get object: 404 NoSuchKey: The specified key does not exist. (request id r1)" {
		t.Errorf("get: %v", err)
	}
	_, err = c.HeadObject(ctx, "b", key)
	if !errors.Is(err, ErrNotFound) || err.Error() != "s3: head object: 404 NotFound (request id hdr-id)" {
		t.Errorf("head: %v", err)
	}
	_, err = c.GetObject(ctx, "b", key+"/quoted", GetOptions{})
	if err == nil || strings.Contains(err.Error(), "0b6f3f5e") || strings.Contains(err.Error(), "0190f0c2") {
		t.Errorf("quoted key: %v", err)
	}
}

func TestNoRetryOn4xx(t *testing.T) {
	for _, status := range []int{400, 403, 404, 409, 412} {
		f, c := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(status)
			io.WriteString(w, `<Error><Code>Whatever</Code></Error>`)
		})
		_, err := c.PutObject(context.Background(), "b", "k", strings.NewReader("abc"), 3, PutOptions{})
		var se *Error
		if !errors.As(err, &se) || se.StatusCode != status || len(f.requests()) != 1 {
			t.Errorf("%d: %v after %d requests, want one", status, err, len(f.requests()))
		}
	}
	for _, status := range []int{500, 502, 503, 429} {
		f, c := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
			io.Copy(io.Discard, r.Body)
			if n < 3 {
				w.WriteHeader(status)
				return
			}
		})
		if _, err := c.PutObject(context.Background(), "b", "k", strings.NewReader("abc"), 3, PutOptions{}); err != nil || len(f.requests()) != 3 {
			t.Errorf("%d: %v after %d requests, want success on the third", status, err, len(f.requests()))
		}
	}
}

// TestPlainHTTPHashesTheBody: over HTTP the body is hashed and signed,
// never sent as UNSIGNED-PAYLOAD.
func TestPlainHTTPHashesTheBody(t *testing.T) {
	f, c := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) { io.Copy(io.Discard, r.Body) })
	if _, err := c.PutObject(context.Background(), "b", "a b", strings.NewReader("Welcome to Amazon S3."), 21, PutOptions{IfNoneMatch: true}); err != nil {
		t.Fatal(err)
	}
	r := f.requests()[0]
	if got := r.Header.Get("X-Amz-Content-Sha256"); got != "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072" {
		t.Errorf("payload hash %q", got)
	}
	if r.Header.Get("If-None-Match") != "*" || !strings.Contains(r.Header.Get("Authorization"), "if-none-match") {
		t.Errorf("If-None-Match not sent and signed: %v", r.Header)
	}
	if r.URL.EscapedPath() != "/b/a%20b" || r.ContentLength != 21 {
		t.Errorf("path %q length %d", r.URL.EscapedPath(), r.ContentLength)
	}
}

func TestVirtualHostedURL(t *testing.T) {
	c, err := New(Config{Endpoint: "https://s3.example.com/base/", Credentials: Credentials{AccessKeyID: "a", SecretAccessKey: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	u := c.url("bucket", "a b/c")
	if u.Host != "bucket.s3.example.com" || u.EscapedPath() != "/base/a%20b/c" {
		t.Errorf("virtual hosted: %s %s", u.Host, u.EscapedPath())
	}
	c.pathStyle = true
	u = c.url("bucket", "a+b")
	if u.Host != "s3.example.com" || u.EscapedPath() != "/base/bucket/a%2Bb" {
		t.Errorf("path style: %s %s", u.Host, u.EscapedPath())
	}
	for _, bad := range []string{"s3.example.com", "ftp://x", "https://x/?a=b"} {
		if _, err := New(Config{Endpoint: bad}); err == nil {
			t.Errorf("endpoint %q accepted", bad)
		}
	}
}

func TestByteRange(t *testing.T) {
	if got := ByteRange(0, 10); got != "bytes=0-9" {
		t.Error(got)
	}
	if got := ByteRange(5, 1<<62*2-1); got != "bytes=5-" {
		t.Error(got)
	}
}

// TestHeaderBound: an answer whose headers pass MaxResponseHeaderBytes is
// an error, not read into memory; one just under it is read.
func TestHeaderBound(t *testing.T) {
	for _, c := range []struct {
		size int
		ok   bool
	}{{MaxResponseHeaderBytes - 1024, true}, {MaxResponseHeaderBytes + 1024, false}} {
		_, cl := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
			w.Header().Set("X-Padding", strings.Repeat("a", c.size))
			w.Header().Set("Content-Length", "0")
		})
		_, err := cl.HeadObject(context.Background(), "b", "k")
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), "headers exceeded")) {
			t.Errorf("headers of %d bytes: %v", c.size, err)
		}
	}
}

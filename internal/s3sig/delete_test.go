package s3sig

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// readDelete parses a Delete document as a server would.
func readDelete(t *testing.T, body []byte) (quiet bool, keys []string) {
	t.Helper()
	var x struct {
		Quiet   bool `xml:"Quiet"`
		Objects []struct {
			Key string `xml:"Key"`
		} `xml:"Object"`
	}
	if err := xml.Unmarshal(body, &x); err != nil {
		t.Fatalf("the Delete document does not parse: %v\n%s", err, body)
	}
	for _, o := range x.Objects {
		keys = append(keys, o.Key)
	}
	return x.Quiet, keys
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestDeleteObjectsRequest(t *testing.T) {
	keys := []string{"tenants/a b/c", "tenants/a&b<c>\"d'", "tenants/ü/日本語", "t/tab\there"}
	var body []byte
	f, c := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		body, _ = io.ReadAll(r.Body)
		io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></DeleteResult>`)
	})
	failed, err := c.DeleteObjects(context.Background(), "b", keys)
	if err != nil || len(failed) != 0 {
		t.Fatalf("delete objects: %v %v", failed, err)
	}
	r := f.requests()[0]
	if r.Method != http.MethodPost || r.URL.EscapedPath() != "/b" || r.URL.RawQuery != "delete=" {
		t.Errorf("request %s %s?%s, want POST /b?delete=", r.Method, r.URL.EscapedPath(), r.URL.RawQuery)
	}
	md := md5.Sum(body)
	if got := r.Header.Get("Content-Md5"); got != base64.StdEncoding.EncodeToString(md[:]) {
		t.Errorf("Content-MD5 %q does not match the body", got)
	}
	if got := r.Header.Get("X-Amz-Content-Sha256"); got != sha256Hex(body) {
		t.Errorf("payload hash %q is not the body's", got)
	}
	if !strings.Contains(r.Header.Get("Authorization"), "content-md5") {
		t.Errorf("Content-MD5 is not signed: %s", r.Header.Get("Authorization"))
	}
	quiet, got := readDelete(t, body)
	if !quiet || fmt.Sprint(got) != fmt.Sprint(keys) {
		t.Errorf("quiet %v keys %q, want quiet and %q", quiet, got, keys)
	}
}

func TestDeleteObjectsErrors(t *testing.T) {
	keys := []string{"objects/0b6f3f5e-1d2c/one", "objects/0b6f3f5e-1d2c/two", "objects/0b6f3f5e-1d2c/three"}
	_, c := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `<DeleteResult>
<Error><Key>objects/0b6f3f5e-1d2c/two</Key><Code>AccessDenied</Code><Message>Access to objects/0b6f3f5e-1d2c/two denied</Message></Error>
<Error><Key>objects/0b6f3f5e-1d2c/three</Key><Code>NoSuchKey</Code><Message>gone</Message></Error>
<Deleted><Key>objects/0b6f3f5e-1d2c/one</Key></Deleted>
</DeleteResult>`)
	})
	failed, err := c.DeleteObjects(context.Background(), "b", keys)
	if err != nil {
		t.Fatal(err)
	}
	// NoSuchKey is a delete done, as DeleteObject's 204 for a missing key.
	if len(failed) != 1 || failed[0].Key != keys[1] || failed[0].Code != "AccessDenied" {
		t.Fatalf("failed %+v, want the second key, AccessDenied", failed)
	}
	if strings.Contains(failed[0].Message, "0b6f3f5e") {
		t.Errorf("the message quotes the key: %q", failed[0].Message)
	}
}

func TestDeleteObjectsAnswers(t *testing.T) {
	cases := []struct {
		name    string
		status  int
		body    string
		refused bool
		tries   int
	}{
		{"not implemented", 501, `<Error><Code>NotImplemented</Code><Message>A header you provided implies functionality that is not implemented</Message></Error>`, true, 1},
		{"plain 501", 501, ``, true, 1},
		{"method not allowed", 405, `<Error><Code>MethodNotAllowed</Code></Error>`, true, 1},
		{"400 not implemented", 400, `<Error><Code>NotImplemented</Code></Error>`, true, 1},
		{"denied", 403, `<Error><Code>AccessDenied</Code></Error>`, false, 1},
		{"busy", 503, `<Error><Code>SlowDown</Code></Error>`, false, 5},
		{"error in a 200", 200, `<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>`, false, 1},
		{"other document", 200, `<ListBucketResult></ListBucketResult>`, false, 1},
		{"not xml", 200, `ok`, false, 1},
		{"unknown key", 200, `<DeleteResult><Error><Key>other</Key><Code>AccessDenied</Code></Error></DeleteResult>`, false, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
				io.Copy(io.Discard, r.Body)
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			failed, err := c.DeleteObjects(context.Background(), "b", []string{"k1", "k2"})
			if err == nil || failed != nil {
				t.Fatalf("got %v, %v; want an error", failed, err)
			}
			if errors.Is(err, ErrBatchRefused) != tc.refused {
				t.Errorf("%v: refused %v, want %v", err, !tc.refused, tc.refused)
			}
			if n := len(f.requests()); n != tc.tries {
				t.Errorf("sent %d times, want %d", n, tc.tries)
			}
		})
	}
}

func TestDeleteObjectsRefusesBadInput(t *testing.T) {
	f, c := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		io.WriteString(w, `<DeleteResult/>`)
	})
	ctx := context.Background()
	if failed, err := c.DeleteObjects(ctx, "b", nil); err != nil || failed != nil {
		t.Errorf("no keys: %v %v", failed, err)
	}
	many := make([]string, MaxDeleteKeys+1)
	for i := range many {
		many[i] = fmt.Sprint("k", i)
	}
	if _, err := c.DeleteObjects(ctx, "b", many); err == nil {
		t.Error("1,001 keys were sent in one call")
	}
	if _, err := c.DeleteObjects(ctx, "b", many[:MaxDeleteKeys]); err != nil {
		t.Errorf("1,000 keys: %v", err)
	}
	// Escaping these would name other keys.
	for _, bad := range []string{"a\x01b", "a\rb", "a\xffb", ""} {
		if _, err := c.DeleteObjects(ctx, "b", []string{"ok", bad}); err == nil {
			t.Errorf("key %q was sent", bad)
		}
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("%d requests, want only the one of 1,000 keys", n)
	}
}

func TestDeleteBodyRoundTrips(t *testing.T) {
	keys := []string{"a]]>b", "<![CDATA[x]]>", "&amp;", "x\ny", "emoji 🙂"}
	b, err := deleteBody(keys)
	if err != nil {
		t.Fatal(err)
	}
	_, got := readDelete(t, b)
	if fmt.Sprint(got) != fmt.Sprint(keys) {
		t.Errorf("keys %q came back as %q", keys, got)
	}
}

package s3sig

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"unicode/utf8"
)

// MaxDeleteKeys is the most keys one DeleteObjects call may name.
const MaxDeleteKeys = 1000

// DeleteError is one key a DeleteObjects call did not delete. Its Key is
// the caller's own; Message never quotes it.
type DeleteError struct {
	Key     string
	Code    string
	Message string
}

// ErrBatchRefused: the server does not offer DeleteObjects at all (501
// NotImplemented, or a 405 or 400 that says so); single DELETEs still work.
var ErrBatchRefused = errors.New("s3: the server refuses multi-object delete")

// DeleteObjects removes up to MaxDeleteKeys keys in one call, in quiet
// mode: the answer lists only the keys that were not deleted, and a
// missing key counts as deleted, as with DeleteObject. A key a server
// reports as NoSuchKey is left out of the result for the same reason.
//
// The error is for the call as a whole; per-key failures are in the slice.
// A server that offers no multi-object delete gives an error for which
// errors.Is(err, ErrBatchRefused) holds.
func (c *Client) DeleteObjects(ctx context.Context, bucket string, keys []string) ([]DeleteError, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	if len(keys) > MaxDeleteKeys {
		return nil, fmt.Errorf("s3: delete objects: %d keys, at most %d a call", len(keys), MaxDeleteKeys)
	}
	body, err := deleteBody(keys)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	md := md5.Sum(body)
	h := http.Header{}
	h.Set("Content-Type", "application/xml")
	// S3 requires an integrity header on this call; Content-MD5 is the
	// one every server the project runs on understands.
	h.Set("Content-Md5", base64.StdEncoding.EncodeToString(md[:]))
	resp, err := c.do(ctx, &request{
		op: "delete objects", method: http.MethodPost, bucket: bucket, query: Query("delete", ""),
		header: h, body: bytes.NewReader(body), size: int64(len(body)), payload: hex.EncodeToString(sum[:]),
	})
	if err != nil {
		var se *Error
		if errors.As(err, &se) && refusesBatch(se) {
			return nil, fmt.Errorf("%w: %w", ErrBatchRefused, err)
		}
		return nil, err
	}
	b, err := readBody("delete objects", resp)
	if err != nil {
		return nil, err
	}
	return parseDeleteResult(b, keys)
}

// refusesBatch reports whether an answer says the call itself is not
// offered, as opposed to failing this once.
func refusesBatch(e *Error) bool {
	switch {
	case e.StatusCode == http.StatusNotImplemented:
		return true
	case e.Code == "NotImplemented":
		return true
	case e.StatusCode == http.StatusMethodNotAllowed:
		return true
	}
	return false
}

// deleteBody writes the Delete document. A key XML cannot carry (a
// control character, invalid UTF-8) is refused rather than escaped:
// escaping would name, and delete, another key.
func deleteBody(keys []string) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(64 + len(keys)*96)
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Quiet>true</Quiet>`)
	for _, k := range keys {
		if k == "" || !xmlSafe(k) {
			return nil, errors.New("s3: delete objects: a key holds characters an XML document cannot carry")
		}
		b.WriteString("<Object><Key>")
		xml.EscapeText(&b, []byte(k))
		b.WriteString("</Key></Object>")
	}
	b.WriteString("</Delete>")
	return b.Bytes(), nil
}

// xmlSafe reports whether s holds only characters XML 1.0 allows and that
// survive a parse unchanged (a carriage return would become a newline).
func xmlSafe(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		switch {
		case r == '\t' || r == '\n':
		case r < 0x20 || r == '\r':
			return false
		case r >= 0xD800 && r <= 0xDFFF, r == 0xFFFE, r == 0xFFFF:
			return false
		}
	}
	return true
}

type deleteResultXML struct {
	XMLName xml.Name
	Deleted []struct {
		Key string `xml:"Key"`
	} `xml:"Deleted"`
	Errors []struct {
		Key     string `xml:"Key"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Error"`
	// An <Error> document sent with a 200 (the call failed as a whole).
	Code      string `xml:"Code"`
	Message   string `xml:"Message"`
	RequestID string `xml:"RequestId"`
}

// parseDeleteResult reads a DeleteResult. Only what the call named can be
// reported: an error for a key it did not send means the answer is not
// about this call, and a document of another kind is no proof of deletes.
func parseDeleteResult(body []byte, keys []string) ([]DeleteError, error) {
	var x deleteResultXML
	if err := xml.Unmarshal(body, &x); err != nil {
		return nil, fmt.Errorf("s3: delete objects: reading the answer: %w", err)
	}
	switch x.XMLName.Local {
	case "DeleteResult":
	case "Error":
		return nil, &Error{Op: "delete objects", StatusCode: http.StatusOK, Code: x.Code, Message: x.Message, RequestID: x.RequestID}
	default:
		return nil, errors.New("s3: delete objects: the answer is not a DeleteResult")
	}
	asked := make(map[string]bool, len(keys))
	for _, k := range keys {
		asked[k] = true
	}
	var out []DeleteError
	for _, e := range x.Errors {
		if !asked[e.Key] {
			return nil, errors.New("s3: delete objects: the answer reports a key the call did not name")
		}
		if e.Code == "NoSuchKey" {
			continue
		}
		out = append(out, DeleteError{Key: e.Key, Code: redact(e.Code, e.Key), Message: redact(e.Message, e.Key)})
	}
	return out, nil
}

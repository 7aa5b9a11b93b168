package s3sig

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Sentinels for errors.Is. An *Error matches the ones its status and code
// stand for, so callers test kinds without parsing codes:
//
//	if errors.Is(err, s3sig.ErrNotFound) { ... }
var (
	// ErrNotFound: the object does not exist (404 NoSuchKey, or a 404 to a
	// HEAD, which has no body to name a code). A missing bucket is not
	// ErrNotFound: treating it as a missing object would let a wrong
	// configuration pass for an empty store.
	ErrNotFound = errors.New("s3: no such key")
	// ErrPreconditionFailed: a conditional request's condition failed (412),
	// as If-None-Match: * on a key that exists.
	ErrPreconditionFailed = errors.New("s3: precondition failed")
	// ErrAccessDenied: the keys may not do this (403 AccessDenied).
	ErrAccessDenied = errors.New("s3: access denied")
	// ErrNoSuchBucket: the bucket does not exist.
	ErrNoSuchBucket = errors.New("s3: no such bucket")
	// ErrInsufficientStorage: the service or the bucket's quota has no
	// room for the object (507, QuotaExceeded, MinIO's XMinioStorageFull
	// and bucket quota). Waiting or freeing space helps; a retry now does
	// not.
	ErrInsufficientStorage = errors.New("s3: insufficient storage")
)

// Error is an S3 error answer. Its text never names the object key: keys
// hold tenant ids and the server's logs must not name a tenant. Callers add
// what context they may.
type Error struct {
	Op         string // "put object"
	StatusCode int
	Code       string // "SlowDown"; for a body-less answer, made from the status
	Message    string // with any copy of the key replaced by "<key>"
	RequestID  string
	HostID     string
	Attempts   int // how many times the request was sent

	// CanonicalRequest and StringToSign are what a server that answered
	// SignatureDoesNotMatch says it computed (AWS and versitygw send them).
	// They name the key, so Error() leaves them out; compare them with the
	// client's own when debugging.
	CanonicalRequest string
	StringToSign     string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("s3: ")
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "%d %s", e.StatusCode, e.Code)
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (request id %s)", e.RequestID)
	}
	return b.String()
}

// Is lets errors.Is match the sentinels above.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound && (e.Code == "NoSuchKey" || e.Code == "NotFound")
	case ErrPreconditionFailed:
		return e.StatusCode == http.StatusPreconditionFailed
	case ErrAccessDenied:
		return e.StatusCode == http.StatusForbidden && (e.Code == "AccessDenied" || e.Code == "Forbidden")
	case ErrNoSuchBucket:
		return e.Code == "NoSuchBucket"
	case ErrInsufficientStorage:
		switch e.Code {
		case "QuotaExceeded", "XMinioStorageFull", "XMinioAdminBucketQuotaExceeded", "InsufficientStorage":
			return true
		}
		return e.StatusCode == http.StatusInsufficientStorage
	}
	return false
}

// retryable reports whether the answer is worth sending again: the server
// is busy or failed (5xx, 429), or a concurrent conditional write was in
// flight (AWS answers 409 ConditionalRequestConflict to If-None-Match when
// another write to the key is under way). Other 4xx answers will not
// change, so they are never retried.
func (e *Error) retryable() bool {
	switch {
	case e.Is(ErrInsufficientStorage):
		return false
	case e.StatusCode == http.StatusNotImplemented:
		// The server does not offer the call (DeleteObjects on some
		// gateways): asking again cannot change that.
		return false
	case e.StatusCode >= 500, e.StatusCode == http.StatusTooManyRequests:
		return true
	case e.StatusCode == http.StatusConflict && e.Code == "ConditionalRequestConflict":
		return true
	}
	return false
}

// newError builds an *Error from an answer's status and body. A body-less
// answer (HEAD, or a proxy's plain 502) gets a code made from its status,
// so 404 to a HEAD reads "NotFound".
func newError(op string, resp *http.Response, body []byte, key string) *Error {
	e := &Error{Op: op, StatusCode: resp.StatusCode}
	if x, ok := parseErrorXML(body); ok {
		e.Code, e.Message, e.RequestID, e.HostID = x.Code, x.Message, x.RequestID, x.HostID
		e.CanonicalRequest, e.StringToSign = x.CanonicalRequest, x.StringToSign
	}
	if e.Code == "" {
		e.Code = strings.ReplaceAll(http.StatusText(resp.StatusCode), " ", "")
		if e.Code == "" {
			e.Code = "Unknown"
		}
	}
	if e.RequestID == "" {
		e.RequestID = resp.Header.Get("X-Amz-Request-Id")
	}
	e.Message = redact(e.Message, key)
	e.Code = redact(e.Code, key)
	return e
}

// redact removes the object key from a server's text: some servers quote
// the key, the request path or a part of it in their messages. Long
// segments go too, since a tenant id alone must not reach a log.
func redact(s, key string) string {
	if key == "" || s == "" {
		return s
	}
	parts := []string{key, EscapePath(key)}
	for _, seg := range strings.Split(key, "/") {
		if len(seg) >= 8 {
			parts = append(parts, seg, EscapeQuery(seg))
		}
	}
	for _, k := range parts {
		s = strings.ReplaceAll(s, k, "<key>")
	}
	return s
}

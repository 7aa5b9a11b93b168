// Package s3sig is the server's own small S3 client: AWS Signature Version 4
// header signing and the handful of S3 calls the object store needs. It
// uses the standard library only, so the shipped binary carries no SDK.
package s3sig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strings"
	"sync"
	"time"
)

const (
	algorithm = "AWS4-HMAC-SHA256"
	// TimeFormat is the layout of x-amz-date.
	TimeFormat = "20060102T150405Z"
	dateFormat = "20060102"

	// UnsignedPayload in x-amz-content-sha256 tells S3 that the body is not
	// covered by the signature. The body is then protected only by the
	// transport, so the client uses it over TLS alone: over plain HTTP an
	// on-path attacker could swap the bytes of a correctly signed request.
	UnsignedPayload = "UNSIGNED-PAYLOAD"

	// EmptySHA256 is the hex SHA-256 of an empty payload, the payload hash
	// of every request without a body.
	EmptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// Credentials are the keys a request is signed with. SessionToken is set
// only for temporary credentials; it is sent as x-amz-security-token.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
}

// Signer signs requests with Signature Version 4 in the Authorization
// header. The zero value is not usable: set Credentials, Region and
// Service. A Signer is safe for concurrent use.
type Signer struct {
	Credentials Credentials
	Region      string
	Service     string // "s3"

	// NormalizePath removes "." and ".." segments and repeated slashes from
	// the path before it is signed, as generic AWS services expect. S3 must
	// not: "a//b" and "a/./b" are distinct object keys there, and the
	// server signs the path exactly as it arrived.
	NormalizePath bool

	// ContentSHA256Header sends the payload hash as x-amz-content-sha256 and
	// signs it. S3 requires it on every request; generic services do not.
	ContentSHA256Header bool

	mu      sync.Mutex
	keyDate string // the date (yyyymmdd) signingKey was derived for
	key     []byte
}

// NewS3Signer returns a signer set up as S3 requires: no path
// normalisation and an x-amz-content-sha256 header on every request.
func NewS3Signer(c Credentials, region string) *Signer {
	return &Signer{Credentials: c, Region: region, Service: "s3", ContentSHA256Header: true}
}

// Sign adds x-amz-date, x-amz-security-token (with a session token),
// x-amz-content-sha256 (with ContentSHA256Header) and Authorization to req.
// It signs the host and every header already in req.Header, so the caller
// sets the headers it means to send before signing and changes none after.
// req.URL.Path is the decoded path; req.URL.RawQuery is parsed and signed
// in canonical order. payloadHash is the hex SHA-256 of the body, or
// UnsignedPayload.
func (s *Signer) Sign(req *http.Request, payloadHash string, now time.Time) {
	s.sign(req, payloadHash, now)
}

// signature holds the intermediate texts, which the known-answer tests
// compare and which help when a server answers SignatureDoesNotMatch.
type signature struct {
	canonicalRequest string
	stringToSign     string
	signature        string
	authorization    string
}

func (s *Signer) sign(req *http.Request, payloadHash string, now time.Time) signature {
	now = now.UTC()
	amzDate := now.Format(TimeFormat)
	date := now.Format(dateFormat)

	req.Header.Set("X-Amz-Date", amzDate)
	if s.Credentials.SessionToken != "" {
		req.Header.Set("X-Amz-Security-Token", s.Credentials.SessionToken)
	}
	if s.ContentSHA256Header {
		req.Header.Set("X-Amz-Content-Sha256", payloadHash)
	}

	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	canonHeaders, signedHeaders := canonicalHeaders(req.Header, host)

	p := req.URL.Path
	if s.NormalizePath {
		p = normalizePath(p)
	}
	var sig signature
	sig.canonicalRequest = strings.Join([]string{
		req.Method,
		EscapePath(p),
		CanonicalQuery(req.URL.RawQuery),
		canonHeaders,
		signedHeaders,
		payloadHash,
	}, "\n")

	scope := date + "/" + s.Region + "/" + s.Service + "/aws4_request"
	sum := sha256.Sum256([]byte(sig.canonicalRequest))
	sig.stringToSign = algorithm + "\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	sig.signature = hex.EncodeToString(hmacSHA256(s.signingKey(date), sig.stringToSign))
	sig.authorization = algorithm + " Credential=" + s.Credentials.AccessKeyID + "/" + scope +
		", SignedHeaders=" + signedHeaders + ", Signature=" + sig.signature
	req.Header.Set("Authorization", sig.authorization)
	return sig
}

// signingKey derives the key for one day. It is cached because every
// request of a day uses the same one and the derivation is four HMACs.
func (s *Signer) signingKey(date string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keyDate == date && s.key != nil {
		return s.key
	}
	k := hmacSHA256([]byte("AWS4"+s.Credentials.SecretAccessKey), date)
	k = hmacSHA256(k, s.Region)
	k = hmacSHA256(k, s.Service)
	k = hmacSHA256(k, "aws4_request")
	s.keyDate, s.key = date, k
	return k
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// canonicalHeaders returns the canonical header block (each line
// "name:value\n", names lower case and sorted, values trimmed with inner
// runs of spaces collapsed, repeated headers joined by commas) and the
// signed header list.
func canonicalHeaders(h http.Header, host string) (string, string) {
	values := make(map[string][]string, len(h)+1)
	for name, vs := range h {
		lname := strings.ToLower(name)
		if lname == "authorization" {
			continue
		}
		values[lname] = append(values[lname], vs...)
	}
	if _, ok := values["host"]; !ok {
		values["host"] = []string{host}
	}
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	sort.Strings(names)

	var b strings.Builder
	for _, name := range names {
		b.WriteString(name)
		b.WriteByte(':')
		for i, v := range values[name] {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(trimHeaderValue(v))
		}
		b.WriteByte('\n')
	}
	return b.String(), strings.Join(names, ";")
}

// trimHeaderValue trims a value and collapses each run of spaces, tabs
// and folded line breaks inside it to one space.
func trimHeaderValue(v string) string {
	return strings.Join(strings.Fields(v), " ")
}

// normalizePath is the generic services' path normalisation: dot segments
// and repeated slashes go, a trailing slash stays.
func normalizePath(p string) string {
	if p == "" {
		return "/"
	}
	clean := path.Clean("/" + p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean
}

// EscapePath encodes a decoded path as S3 signs it and as the client sends
// it: every byte but the unreserved A-Z a-z 0-9 - . _ ~ and "/" becomes
// %XX with upper-case hex digits. An empty path is "/".
func EscapePath(p string) string {
	if p == "" {
		return "/"
	}
	return escape(p, true)
}

// EscapeQuery encodes one query key or value for the canonical query:
// like EscapePath, but "/" is encoded too.
func EscapeQuery(s string) string {
	return escape(s, false)
}

func escape(s string, keepSlash bool) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !unreserved(s[i], keepSlash) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hexUpper = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if unreserved(c, keepSlash) {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hexUpper[c>>4], hexUpper[c&15])
	}
	return string(b)
}

func unreserved(c byte, keepSlash bool) bool {
	switch {
	case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		return true
	case c == '-', c == '.', c == '_', c == '~':
		return true
	case c == '/':
		return keepSlash
	}
	return false
}

// CanonicalQuery turns a raw query into its canonical form: each key and
// value decoded, then encoded with EscapeQuery, pairs sorted by key then
// value and joined with "&". A key without "=" ("?versioning") is signed as
// "versioning=", as S3 requires. The client sends this same text on the
// wire, so what it signs is exactly what the server sees.
func CanonicalQuery(raw string) string {
	if raw == "" {
		return ""
	}
	type pair struct{ k, v string }
	var pairs []pair
	for _, part := range strings.Split(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		pairs = append(pairs, pair{EscapeQuery(unescapeLoose(k)), EscapeQuery(unescapeLoose(v))})
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].k != pairs[j].k {
			return pairs[i].k < pairs[j].k
		}
		return pairs[i].v < pairs[j].v
	})
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	return b.String()
}

// unescapeLoose decodes %XX escapes and keeps "+" as it is (S3 does not
// read "+" as a space in a signed query); text that is not valid escaping
// is taken literally rather than refused.
func unescapeLoose(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	u, err := url.PathUnescape(s)
	if err != nil {
		return s
	}
	return u
}

// Query builds a canonical raw query from pairs of key and value, the form
// the client puts on the wire. A key with an empty value is written "k=".
func Query(kv ...string) string {
	var parts []string
	for i := 0; i+1 < len(kv); i += 2 {
		parts = append(parts, EscapeQuery(kv[i])+"="+EscapeQuery(kv[i+1]))
	}
	return CanonicalQuery(strings.Join(parts, "&"))
}

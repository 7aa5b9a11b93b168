package vcon

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"io"
	"strings"
)

// limitReader passes at most limit bytes and fails with ErrTooLarge as
// soon as one more arrives, so an over-long body (or a gzip bomb's output)
// is refused after limit+1 bytes, never after reading it all. It counts
// what it passed in n.
type limitReader struct {
	r     io.Reader
	limit int64
	n     int64
	err   error // sticky
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	if room := l.limit - l.n + 1; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := l.r.Read(p)
	l.n += int64(n)
	if l.n > l.limit {
		l.err = ErrTooLarge
		return 0, l.err
	}
	if err != nil {
		l.err = err
	}
	return n, err
}

// gunzipReader tells a body that is not valid gzip (an InvalidError, 400)
// from a body that could not be read (the reader's own error).
type gunzipReader struct {
	zr   *gzip.Reader
	body *limitReader
}

func (g *gunzipReader) Read(p []byte) (int, error) {
	n, err := g.zr.Read(p)
	if err != nil && err != io.EOF {
		err = gzipError(g.body, err)
	}
	return n, err
}

func gzipError(body *limitReader, err error) error {
	if body.err != nil && body.err != io.EOF {
		return body.err
	}
	if err == io.EOF {
		return &InvalidError{Reason: "not valid gzip: empty body"}
	}
	return &InvalidError{Reason: "not valid gzip: " + strings.TrimPrefix(err.Error(), "gzip: ")}
}

// decodePayload reads a signed vCon's payload from its string content.
func decodePayload(content io.Reader, limit int64) (*doc, error) {
	dec := base64.NewDecoder(base64.RawURLEncoding, &base64urlFilter{r: content})
	var head [2]byte
	n, err := io.ReadFull(dec, head[:])
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, err
	}
	src := io.MultiReader(bytes.NewReader(head[:n]), dec)
	if n == 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(src)
		if err != nil {
			return nil, err
		}
		src = &limitReader{r: zr, limit: limit}
	}
	return readDoc(src, limit, docOptions{payload: true})
}

var errPadding = errors.New("characters after '=' padding")

// base64urlFilter lets '=' padding and the standard alphabet's '+' and '/'
// through to a RawURLEncoding decoder: JWS payloads are unpadded base64url,
// but the server never verifies a signature, so nothing depends on the
// producer having been strict.
type base64urlFilter struct {
	r      io.Reader
	padded bool
}

func (f *base64urlFilter) Read(p []byte) (int, error) {
	for {
		n, err := f.r.Read(p)
		if !f.padded && bytes.IndexByte(p[:n], '=') < 0 && bytes.IndexByte(p[:n], '+') < 0 && bytes.IndexByte(p[:n], '/') < 0 {
			if n > 0 || err != nil {
				return n, err
			}
		}
		k := 0
		for _, c := range p[:n] {
			switch {
			case c == '=':
				f.padded = true
				continue
			case f.padded && c != '\r' && c != '\n':
				return k, errPadding
			case c == '+':
				c = '-'
			case c == '/':
				c = '_'
			}
			p[k] = c
			k++
		}
		if k > 0 || err != nil || n == 0 {
			return k, err
		}
	}
}

// payloadProblem says in a few words why a payload could not be read.
func payloadProblem(err error) string {
	var invalid *InvalidError
	var corrupt base64.CorruptInputError
	var deflate flate.CorruptInputError
	switch {
	case err == nil:
		return "it is missing"
	case errors.As(err, &invalid):
		return invalid.Reason
	case errors.As(err, &corrupt), err == errPadding:
		return "it is not base64url (" + err.Error() + ")"
	case errors.Is(err, ErrTooLarge):
		return "its gzip inflates past the size limit"
	case errors.As(err, &deflate), errors.Is(err, gzip.ErrHeader), errors.Is(err, gzip.ErrChecksum), errors.Is(err, io.ErrUnexpectedEOF):
		return "its gzip is not valid (" + strings.TrimPrefix(err.Error(), "gzip: ") + ")"
	}
	return err.Error()
}

package vcon

import (
	"errors"
	"io"
	"unicode/utf8"
)

// stringReader reads the content of the string at the current offset as a
// stream, so a signed vCon's payload is decoded as it passes. An error of
// the enclosing document (a read error, a syntax error in the string) is
// kept in err and reported to the consumer as errEnclosing, so that the
// consumer's own errors and the document's can be told apart.
type stringReader struct {
	s    *scanner
	end  bool
	err  error
	tmp  [utf8.UTFMax]byte
	pend []byte
}

var errEnclosing = errors.New("vcon: the enclosing document failed")

// newStringReader starts reading the string at the current offset.
func (s *scanner) newStringReader() *stringReader {
	s.i++ // the opening quote
	return &stringReader{s: s}
}

func (r *stringReader) Read(p []byte) (int, error) {
	if len(r.pend) > 0 {
		n := copy(p, r.pend)
		r.pend = r.pend[n:]
		return n, nil
	}
	if r.err != nil {
		return 0, errEnclosing
	}
	if r.end {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	dst := p
	if len(p) < utf8.UTFMax {
		dst = r.tmp[:]
	}
	n, end, err := r.s.strRead(dst)
	r.end = end
	if err != nil {
		r.err = err
		return 0, errEnclosing
	}
	if len(p) < utf8.UTFMax {
		r.pend = r.tmp[:n]
		n = copy(p, r.pend)
		r.pend = r.pend[n:]
	}
	if n == 0 && end {
		return 0, io.EOF
	}
	return n, nil
}

// finish drops what the consumer left of the string.
func (r *stringReader) finish() error {
	if r.err != nil {
		return r.err
	}
	if !r.end {
		if _, _, err := r.s.strRead(nil); err != nil {
			return err
		}
		r.end = true
	}
	return nil
}

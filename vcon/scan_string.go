package vcon

import (
	"encoding/binary"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// plain marks the bytes a string holds as they are: all but the quote,
// the backslash and the control characters, which JSON forbids unescaped.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// special reports whether any of the 8 bytes in w is not plain. Testing
// eight bytes at a time is what lets a 64 MiB inline recording pass
// quickly (bit hacks "haszero" and "hasless", exact about whether a byte
// matches, though not about which one).
func special(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote := w ^ ones*'"'
	backslash := w ^ ones*'\\'
	return ((w-ones*0x20)&^w|(quote-ones)&^quote|(backslash-ones)&^backslash)&highs != 0
}

// strRead decodes the content of the string being read into p, which must
// have room for at least utf8.UTFMax bytes, or drops it when p is nil. It
// returns when p has less room than that, at the closing quote (end), or on
// an error. The opening quote must already be consumed.
func (s *scanner) strRead(p []byte) (n int, end bool, err error) {
	discard := p == nil
	for discard || n+utf8.UTFMax <= len(p) {
		if s.i == s.n && !s.more(1) {
			return n, false, s.endError("in a string")
		}
		b := s.buf[s.i:s.n]
		if !discard && len(b) > len(p)-n {
			b = b[:len(p)-n]
		}
		j := 0
		for j+8 <= len(b) && !special(binary.LittleEndian.Uint64(b[j:])) {
			j += 8
		}
		for j < len(b) && plain[b[j]] {
			j++
		}
		if !discard {
			n += copy(p[n:], b[:j])
		}
		s.i += j
		if j == len(b) {
			continue
		}
		switch c := b[j]; c {
		case '"':
			s.i++
			return n, true, nil
		case '\\':
			r, err := s.escape()
			if err != nil {
				return n, false, err
			}
			if !discard {
				n += utf8.EncodeRune(p[n:], r)
			}
		default:
			return n, false, syntaxError(fmt.Sprintf("control character 0x%02x in a string at byte %d (it must be escaped)", c, s.offset()))
		}
	}
	return n, false, nil
}

// escape decodes the escape sequence at the current offset. A \u escape of
// a UTF-16 surrogate pair gives its character; a lone surrogate, which the
// JSON grammar allows, gives U+FFFD as encoding/json does.
func (s *scanner) escape() (rune, error) {
	if !s.more(2) {
		return 0, s.endError("in a string escape")
	}
	c := s.buf[s.i+1]
	switch c {
	case '"', '\\', '/':
		s.i += 2
		return rune(c), nil
	case 'b':
		s.i += 2
		return '\b', nil
	case 'f':
		s.i += 2
		return '\f', nil
	case 'n':
		s.i += 2
		return '\n', nil
	case 'r':
		s.i += 2
		return '\r', nil
	case 't':
		s.i += 2
		return '\t', nil
	case 'u':
		if !s.more(6) {
			return 0, s.endError("in a \\u escape")
		}
		r, ok := hex4(s.buf[s.i+2 : s.i+6])
		if !ok {
			return 0, syntaxError(fmt.Sprintf("invalid \\u escape at byte %d (want 4 hexadecimal digits)", s.offset()))
		}
		s.i += 6
		if !utf16.IsSurrogate(r) {
			return r, nil
		}
		// A high surrogate takes the low one of a following \u escape; the
		// following escape is left alone when it is not one.
		if r < 0xdc00 && s.more(6) && s.buf[s.i] == '\\' && s.buf[s.i+1] == 'u' {
			if r2, ok := hex4(s.buf[s.i+2 : s.i+6]); ok && 0xdc00 <= r2 && r2 < 0xe000 {
				s.i += 6
				return utf16.DecodeRune(r, r2), nil
			}
		}
		return utf8.RuneError, nil
	}
	return 0, syntaxError(fmt.Sprintf("invalid escape %q in a string at byte %d", "\\"+string(rune(c)), s.offset()))
}

func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// skipString reads and drops the string at the current offset.
func (s *scanner) skipString() error {
	s.i++ // the opening quote
	_, _, err := s.strRead(nil)
	return err
}

// capture reads the string at the current offset into buf (reused when it
// is large enough) and returns its first max bytes, cut at a character
// boundary, with invalid UTF-8 replaced by U+FFFD; the rest is dropped.
func (s *scanner) capture(buf []byte, max int) ([]byte, error) {
	s.i++ // the opening quote
	// Decoding goes a little past max so that a character straddling it is
	// whole before clean cuts it off.
	if cap(buf) < max+2*utf8.UTFMax {
		buf = make([]byte, max+2*utf8.UTFMax)
	}
	buf = buf[:max+2*utf8.UTFMax]
	n := 0
	for n <= max+utf8.UTFMax {
		m, end, err := s.strRead(buf[n:])
		n += m
		if err != nil {
			return nil, err
		}
		if end {
			return clean(buf[:n], max), nil
		}
	}
	if _, _, err := s.strRead(nil); err != nil {
		return nil, err
	}
	return clean(buf[:n], max), nil
}

// readString is capture into a new string. The bytes are captured into
// the scanner's scratch, which keeps the largest capacity it reached.
func (s *scanner) readString(max int) (string, error) {
	b, err := s.capture(s.str[:0], max)
	if cap(b) > cap(s.str) {
		s.str = b[:0]
	}
	return string(b), err
}

// clean replaces each byte that is not part of valid UTF-8 by U+FFFD (as
// encoding/json does) and cuts the result to at most max bytes without
// splitting a character. It may reuse b.
func clean(b []byte, max int) []byte {
	if !utf8.Valid(b) {
		out := make([]byte, 0, len(b)+8)
		for len(b) > 0 {
			r, size := utf8.DecodeRune(b)
			out = utf8.AppendRune(out, r)
			b = b[size:]
		}
		b = out
	}
	if len(b) <= max {
		return b
	}
	k := max
	for k > 0 && !utf8.RuneStart(b[k]) {
		k--
	}
	return b[:k]
}

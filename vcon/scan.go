package vcon

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is the deepest nesting of objects and arrays a vCon may have.
// Real vCons nest fewer than 20 levels; the bound keeps the container
// stack small and refuses a body of 100,000 '[' at once.
const maxDepth = 512

// bufSize is the scanner's read buffer. Every byte of a body passes through
// it once; nothing else of the body is kept unless a field is captured.
const bufSize = 32 << 10

// scanner is a pull parser over a JSON text that never holds more of it
// than its buffer. The vCon code walks the few paths it cares about with
// object, array and readString; skip validates and drops everything else
// without recursion: open containers live on an explicit stack, so the Go
// stack never grows with the input's nesting.
//
// It validates RFC 8259 syntax as encoding/json does: strings are not
// checked for UTF-8 (captured strings are made valid by clean) and lone
// \u surrogates are accepted and read as U+FFFD.
type scanner struct {
	r     io.Reader
	buf   []byte
	i, n  int    // the unread input is buf[i:n]
	base  int64  // input offset of buf[0], for error messages
	stack []byte // open containers, '{' or '['; its length is the depth
	err   error  // the first read error other than io.EOF; sticky
	eof   bool
	kbuf  []byte // the current member key, capped at maxKey
}

// maxKey caps a captured member key: every key the vCon code looks for is
// shorter, so a longer key can be truncated without ever matching one.
const maxKey = 64

func newScanner(r io.Reader) *scanner {
	return &scanner{r: r, buf: make([]byte, bufSize), kbuf: make([]byte, 0, maxKey+2*utf8.UTFMax)}
}

// offset is the input offset of the next unread byte.
func (s *scanner) offset() int64 { return s.base + int64(s.i) }

// more makes at least k (at most a dozen) unread bytes available and
// reports whether it could; it returns false at the end of input or on a
// read error (kept in s.err).
func (s *scanner) more(k int) bool {
	empty := 0
	for s.n-s.i < k {
		if s.err != nil || s.eof {
			return false
		}
		if s.i > 0 {
			s.base += int64(s.i)
			s.n = copy(s.buf, s.buf[s.i:s.n])
			s.i = 0
		}
		m, err := s.r.Read(s.buf[s.n:])
		s.n += m
		switch {
		case err == io.EOF:
			s.eof = true
		case err != nil:
			s.err = err
		case m == 0:
			// A reader that keeps returning nothing would spin forever.
			if empty++; empty >= 100 {
				s.err = io.ErrNoProgress
			}
		}
	}
	return true
}

// endError is the error for input that ended (or failed) where more was
// needed: the read error if there was one, else a syntax error.
func (s *scanner) endError(where string) error {
	if s.err != nil {
		return s.err
	}
	if s.offset() == 0 {
		return syntaxError("empty body")
	}
	return syntaxError(fmt.Sprintf("unexpected end of input at byte %d %s", s.offset(), where))
}

// unexpected is the error for byte c at the current offset.
func (s *scanner) unexpected(c byte, want string) error {
	return syntaxError(fmt.Sprintf("unexpected %s at byte %d, want %s", describe(c), s.offset(), want))
}

func describe(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("character %q", rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// skipSpace skips whitespace and returns the next byte without consuming
// it; false means the input ended (or failed) first.
func (s *scanner) skipSpace() (byte, bool) {
	for {
		for s.i < s.n {
			switch c := s.buf[s.i]; c {
			case ' ', '\t', '\n', '\r':
				s.i++
			default:
				return c, true
			}
		}
		if !s.more(1) {
			return 0, false
		}
	}
}

// valueStart skips whitespace and returns the first byte of the next value,
// which it checks can start one. It consumes nothing of the value.
func (s *scanner) valueStart() (byte, error) {
	c, ok := s.skipSpace()
	if !ok {
		return 0, s.endError("where a value was expected")
	}
	switch c {
	case '{', '[', '"', 't', 'f', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return c, nil
	}
	return 0, s.unexpected(c, "a value")
}

// end checks that only whitespace follows the value just read.
func (s *scanner) end() error {
	if c, ok := s.skipSpace(); ok {
		return s.unexpected(c, "the end of input after the top-level value")
	}
	return s.err
}

// open consumes the '{' or '[' at the current offset.
func (s *scanner) open(c byte) error {
	if len(s.stack) >= maxDepth {
		return &InvalidError{Reason: fmt.Sprintf("nesting deeper than %d levels at byte %d", maxDepth, s.offset())}
	}
	s.stack = append(s.stack, c)
	s.i++
	return nil
}

func (s *scanner) close() {
	s.i++
	s.stack = s.stack[:len(s.stack)-1]
}

// object reads the object that starts at the next value, calling fn with
// each member's key (capped at maxKey bytes, valid only during the call);
// fn must consume exactly the member's value.
func (s *scanner) object(fn func(key []byte) error) error {
	c, err := s.valueStart()
	if err != nil {
		return err
	}
	if c != '{' {
		return s.unexpected(c, "'{'")
	}
	if err := s.open('{'); err != nil {
		return err
	}
	if c, ok := s.skipSpace(); !ok {
		return s.endError("in an object")
	} else if c == '}' {
		s.close()
		return nil
	}
	for afterComma := false; ; afterComma = true {
		if err := s.memberKey(afterComma, true); err != nil {
			return err
		}
		if err := fn(s.kbuf); err != nil {
			return err
		}
		c, ok := s.skipSpace()
		switch {
		case !ok:
			return s.endError("in an object")
		case c == '}':
			s.close()
			return nil
		case c != ',':
			return s.unexpected(c, "',' or '}' after an object member")
		}
		s.i++
	}
}

// array reads the array that starts at the next value, calling fn for each
// element, which fn must consume; it returns the number of elements.
func (s *scanner) array(fn func() error) (int, error) {
	c, err := s.valueStart()
	if err != nil {
		return 0, err
	}
	if c != '[' {
		return 0, s.unexpected(c, "'['")
	}
	if err := s.open('['); err != nil {
		return 0, err
	}
	if c, ok := s.skipSpace(); !ok {
		return 0, s.endError("in an array")
	} else if c == ']' {
		s.close()
		return 0, nil
	}
	for n := 1; ; n++ {
		if err := fn(); err != nil {
			return n, err
		}
		c, ok := s.skipSpace()
		switch {
		case !ok:
			return n, s.endError("in an array")
		case c == ']':
			s.close()
			return n, nil
		case c != ',':
			return n, s.unexpected(c, "',' or ']' after an array element")
		}
		s.i++
		if err := s.notClosing(']'); err != nil {
			return n, err
		}
	}
}

// notClosing refuses a trailing comma: closer right after a ','.
func (s *scanner) notClosing(closer byte) error {
	if c, ok := s.skipSpace(); ok && c == closer {
		return syntaxError(fmt.Sprintf("trailing comma before %q at byte %d", rune(closer), s.offset()))
	}
	return nil
}

// memberKey reads an object member's key and the ':' after it, leaving the
// key in s.kbuf when keep is set.
func (s *scanner) memberKey(afterComma, keep bool) error {
	c, ok := s.skipSpace()
	if !ok {
		return s.endError("in an object")
	}
	if c != '"' {
		if afterComma && c == '}' {
			return s.notClosing('}')
		}
		return s.unexpected(c, "a string key")
	}
	if keep {
		k, err := s.capture(s.kbuf[:cap(s.kbuf)], maxKey)
		if err != nil {
			return err
		}
		s.kbuf = k
	} else if err := s.skipString(); err != nil {
		return err
	}
	c, ok = s.skipSpace()
	if !ok {
		return s.endError("after an object key")
	}
	if c != ':' {
		return s.unexpected(c, "':' after an object key")
	}
	s.i++
	return nil
}

// skip reads and drops the next value, validating it. Its containers go on
// the scanner's stack, so the depth limit counts from the document's root.
func (s *scanner) skip() error {
	base := len(s.stack)
	for {
		c, err := s.valueStart()
		if err != nil {
			return err
		}
		switch c {
		case '{', '[':
			if err := s.open(c); err != nil {
				return err
			}
			next, ok := s.skipSpace()
			if !ok {
				return s.endError("in a container")
			}
			if c == '{' && next != '}' {
				if err := s.memberKey(false, false); err != nil {
					return err
				}
				continue // to the member's value
			}
			if c == '[' && next != ']' {
				continue // to the first element
			}
			s.close()
		case '"':
			err = s.skipString()
		case 't':
			err = s.literal("true")
		case 'f':
			err = s.literal("false")
		case 'n':
			err = s.literal("null")
		default:
			err = s.number()
		}
		if err != nil {
			return err
		}
		// A value ended: close the containers it ended, or go on to the
		// next member or element.
		for next := false; !next; {
			if len(s.stack) == base {
				return nil
			}
			c, ok := s.skipSpace()
			if !ok {
				return s.endError("in a container")
			}
			top := s.stack[len(s.stack)-1]
			switch {
			case c == ',' && top == '{':
				s.i++
				if err := s.memberKey(true, false); err != nil {
					return err
				}
				next = true
			case c == ',':
				s.i++
				if err := s.notClosing(']'); err != nil {
					return err
				}
				next = true
			case c == '}' && top == '{', c == ']' && top == '[':
				s.close()
			case top == '{':
				return s.unexpected(c, "',' or '}' after an object member")
			default:
				return s.unexpected(c, "',' or ']' after an array element")
			}
		}
	}
}

func (s *scanner) literal(lit string) error {
	for k := 0; k < len(lit); k++ {
		if !s.more(1) {
			return s.endError("in " + lit)
		}
		if c := s.buf[s.i]; c != lit[k] {
			return s.unexpected(c, "the literal "+lit)
		}
		s.i++
	}
	return nil
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? without
// keeping it: numbers are never captured.
func (s *scanner) number() error {
	c, _ := s.peek()
	if c == '-' {
		s.i++
	}
	c, ok := s.peek()
	switch {
	case !ok:
		return s.endError("in a number")
	case c == '0':
		s.i++
		if c, ok := s.peek(); ok && isDigit(c) {
			return syntaxError(fmt.Sprintf("number with a leading zero at byte %d", s.offset()-1))
		}
	case isDigit(c):
		s.digits()
	default:
		return s.unexpected(c, "a digit")
	}
	if c, ok := s.peek(); ok && c == '.' {
		s.i++
		if err := s.someDigits("after '.' in a number"); err != nil {
			return err
		}
	}
	if c, ok := s.peek(); ok && (c == 'e' || c == 'E') {
		s.i++
		if c, ok := s.peek(); ok && (c == '+' || c == '-') {
			s.i++
		}
		if err := s.someDigits("in a number's exponent"); err != nil {
			return err
		}
	}
	return nil
}

func (s *scanner) peek() (byte, bool) {
	if s.i < s.n || s.more(1) {
		return s.buf[s.i], true
	}
	return 0, false
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func (s *scanner) digits() {
	for {
		for s.i < s.n && isDigit(s.buf[s.i]) {
			s.i++
		}
		if s.i < s.n || !s.more(1) {
			return
		}
	}
}

func (s *scanner) someDigits(where string) error {
	c, ok := s.peek()
	if !ok {
		return s.endError(where)
	}
	if !isDigit(c) {
		return s.unexpected(c, "a digit "+where)
	}
	s.digits()
	return nil
}

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

// readString is capture into a new string.
func (s *scanner) readString(max int) (string, error) {
	b, err := s.capture(nil, max)
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

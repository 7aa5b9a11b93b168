package vcon

import (
	"fmt"
	"io"
	"sync"
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
//
// This file holds the buffer, whitespace and errors; scan_walk.go the
// containers (object, array, member keys, skip); scan_number.go literals
// and numbers; scan_string.go strings and escapes; scan_stringreader.go the
// streaming read of one string.
type scanner struct {
	r     io.Reader
	buf   []byte
	i, n  int    // the unread input is buf[i:n]
	base  int64  // input offset of buf[0], for error messages
	stack []byte // open containers, '{' or '['; its length is the depth
	err   error  // the first read error other than io.EOF; sticky
	eof   bool
	kbuf  []byte // the current member key, capped at maxKey
	str   []byte // readString's scratch, reused for every string it reads
	bufs  *scanBufs
	rec   recording
}

// recording keeps the bytes of one value as they pass (startRecord,
// stopRecord), up to a cap: a lawful-basis attachment is checked whole,
// by its own reader, once the scanner has found it to be one. Bytes leave
// the buffer only in more, so that is where they are copied out.
type recording struct {
	on   bool
	from int    // where in buf the bytes not yet copied start
	max  int    // the cap
	over bool   // more than max bytes passed: b was dropped
	b    []byte // the bytes so far
}

// maxKey caps a captured member key: every key the vCon code looks for is
// shorter, so a longer key can be truncated without ever matching one.
const maxKey = 64

// scanBufs are a scanner's buffers, kept in bufPool between documents: an
// export or a pack run inspects one small vCon after another, and fresh
// buffers for each (32 KiB to read, a few KiB for the strings captured) were
// most of what they allocated.
type scanBufs struct {
	buf [bufSize]byte
	str []byte
}

var bufPool = sync.Pool{New: func() any { return new(scanBufs) }}

func newScanner(r io.Reader) *scanner {
	b := bufPool.Get().(*scanBufs)
	return &scanner{r: r, buf: b.buf[:], str: b.str, bufs: b, kbuf: make([]byte, 0, maxKey+2*utf8.UTFMax)}
}

// release gives the buffers back once the document has been read to its
// end; the scanner then reads as an input that has ended. A scanner left on
// an error keeps its buffers, for the garbage collector.
func (s *scanner) release() {
	if b := s.bufs; b != nil {
		b.str = s.str[:0]
		bufPool.Put(b)
	}
	s.buf, s.str, s.bufs, s.i, s.n, s.eof = nil, nil, nil, 0, 0, true
}

// startRecord starts keeping the bytes read from the current offset on,
// at most max of them.
func (s *scanner) startRecord(max int) {
	s.rec = recording{on: true, from: s.i, max: max, b: s.rec.b[:0]}
}

// stopRecord returns the bytes read since startRecord, or nil and false
// when there were more than its max. They are valid until the next
// startRecord.
func (s *scanner) stopRecord() ([]byte, bool) {
	s.keepRecorded()
	s.rec.on = false
	if s.rec.over {
		return nil, false
	}
	return s.rec.b, true
}

func (s *scanner) keepRecorded() {
	r := &s.rec
	if !r.on || r.over {
		return
	}
	if len(r.b)+s.i-r.from > r.max {
		r.over, r.b = true, r.b[:0]
		return
	}
	r.b = append(r.b, s.buf[r.from:s.i]...)
	r.from = s.i
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
			s.keepRecorded()
			s.rec.from = 0
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

// utf8BOM is the UTF-8 byte order mark, U+FEFF.
const utf8BOM = "\xef\xbb\xbf"

// skipBOM consumes a UTF-8 byte order mark at the scanner's position. Only
// a document's start may have one: anywhere else it is an unexpected byte.
func (s *scanner) skipBOM() {
	if s.more(len(utf8BOM)) && string(s.buf[s.i:s.i+len(utf8BOM)]) == utf8BOM {
		s.i += len(utf8BOM)
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
	return 0, s.unexpected(c, "a value"+s.notJSONNumber())
}

// notJSONNumber explains, when the input at the current offset spells NaN
// or Infinity, that JSON has no such numbers: Python's json.dumps writes
// them (unless allow_nan=False), and the bare "unexpected character 'N'"
// would leave its user guessing.
func (s *scanner) notJSONNumber() string {
	for _, w := range []string{"NaN", "Infinity"} {
		if s.more(len(w)) && string(s.buf[s.i:s.i+len(w)]) == w {
			return ": NaN and Infinity are not JSON numbers; send null or a string instead"
		}
	}
	return ""
}

// end checks that only whitespace follows the value just read. It is the
// last call on a scanner: no byte of its buffer has left it (captured
// values are copies), so the buffer goes back to the pool.
func (s *scanner) end() error {
	defer s.release()
	if c, ok := s.skipSpace(); ok {
		return s.unexpected(c, "the end of input after the top-level value")
	}
	return s.err
}

package lawfulbasis

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A small JSON reader for one attachment, at most MaxAttachmentSize bytes.
// encoding/json would do for the fields, but not for the content hash: it
// takes the last of two members of one name silently, turns a lone
// surrogate into U+FFFD and a number into a float64 before JCS (RFC 8785)
// has seen its text. This reader keeps what JCS needs (member order is
// irrelevant, the number's value and the string's code points are not)
// and refuses what JCS refuses: a repeated member, a lone surrogate,
// invalid UTF-8, a number out of IEEE 754 double range.

// maxNesting bounds the recursion of the reader: a lawful-basis attachment
// nests five levels; a body of 100,000 '[' is refused at once.
const maxNesting = 64

// object is a JSON object: its members in the order received, names
// unique.
type object struct {
	names []string
	vals  []any
}

func (o *object) get(name string) (any, bool) {
	for i, n := range o.names {
		if n == name {
			return o.vals[i], true
		}
	}
	return nil, false
}

// number is a JSON number as a double, the only kind of number JCS knows.
type number float64

// decode reads one JSON value and nothing after it. Values are nil, bool,
// string, number, []any and *object.
func decode(b []byte) (any, error) {
	p := &parser{b: b}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.b) {
		return nil, p.errorf("more data after the value")
	}
	return v, nil
}

type parser struct {
	b []byte
	i int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("not valid JSON at byte %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *parser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (any, error) {
	if depth > maxNesting {
		return nil, p.errorf("nesting deeper than %d levels", maxNesting)
	}
	p.space()
	if p.i == len(p.b) {
		return nil, p.errorf("unexpected end")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.string()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		return p.number()
	}
	return nil, p.errorf("unexpected character %q", p.b[p.i])
}

func (p *parser) literal(lit string) error {
	if len(p.b)-p.i < len(lit) || string(p.b[p.i:p.i+len(lit)]) != lit {
		return p.errorf("want %s", lit)
	}
	p.i += len(lit)
	return nil
}

func (p *parser) object(depth int) (any, error) {
	p.i++
	o := &object{}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return o, nil
	}
	for {
		p.space()
		if p.i == len(p.b) || p.b[p.i] != '"' {
			return nil, p.errorf("want a member name")
		}
		name, err := p.string()
		if err != nil {
			return nil, err
		}
		if _, dup := o.get(name); dup {
			// RFC 8785 works on I-JSON (RFC 7493), which forbids it, and
			// parsers disagree on which of the two counts.
			return nil, p.errorf("member %q appears twice in one object; send it once", name)
		}
		p.space()
		if p.i == len(p.b) || p.b[p.i] != ':' {
			return nil, p.errorf("want ':' after a member name")
		}
		p.i++
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		o.names, o.vals = append(o.names, name), append(o.vals, v)
		p.space()
		if p.i == len(p.b) {
			return nil, p.errorf("unexpected end in an object")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return o, nil
		default:
			return nil, p.errorf("want ',' or '}' after an object member")
		}
	}
}

func (p *parser) array(depth int) (any, error) {
	p.i++
	a := []any{}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return a, nil
	}
	for {
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		p.space()
		if p.i == len(p.b) {
			return nil, p.errorf("unexpected end in an array")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return a, nil
		default:
			return nil, p.errorf("want ',' or ']' after an array element")
		}
	}
}

func (p *parser) number() (any, error) {
	start := p.i
	if p.b[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.i < len(p.b) && p.b[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return nil, p.errorf("a number needs digits")
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, p.errorf("a number needs digits after '.'")
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, p.errorf("a number needs digits in its exponent")
		}
	}
	f, err := strconv.ParseFloat(string(p.b[start:p.i]), 64)
	if err != nil {
		return nil, fmt.Errorf("number at byte %d is outside the range of an IEEE 754 double, which JCS (RFC 8785) requires", start)
	}
	return number(f), nil
}

// string reads a string, refusing invalid UTF-8 and lone surrogates: JCS
// hashes code points, and these have none.
func (p *parser) string() (string, error) {
	p.i++
	var out []byte
	for {
		if p.i == len(p.b) {
			return "", p.errorf("unexpected end in a string")
		}
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), nil
		case c < 0x20:
			return "", p.errorf("control character 0x%02x in a string (it must be escaped)", c)
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return "", err
			}
			out = utf8.AppendRune(out, r)
		case c < utf8.RuneSelf:
			out = append(out, c)
			p.i++
		default:
			r, size := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.errorf("a string is not valid UTF-8")
			}
			out = append(out, p.b[p.i:p.i+size]...)
			p.i += size
		}
	}
}

func (p *parser) escape() (rune, error) {
	if p.i+1 >= len(p.b) {
		return 0, p.errorf("unexpected end in an escape")
	}
	c := p.b[p.i+1]
	p.i += 2
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		r, err := p.hex4()
		if err != nil {
			return 0, err
		}
		if !utf16.IsSurrogate(r) {
			return r, nil
		}
		if r < 0xdc00 && p.i+1 < len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
			p.i += 2
			r2, err := p.hex4()
			if err != nil {
				return 0, err
			}
			if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
				return d, nil
			}
		}
		return 0, p.errorf("a lone UTF-16 surrogate in a string; JCS (RFC 8785) cannot hash it")
	}
	return 0, p.errorf("unknown escape \\%c", c)
}

func (p *parser) hex4() (rune, error) {
	if len(p.b)-p.i < 4 {
		return 0, p.errorf("a \\u escape needs four hexadecimal digits")
	}
	n, err := strconv.ParseUint(string(p.b[p.i:p.i+4]), 16, 16)
	if err != nil {
		return 0, p.errorf("a \\u escape needs four hexadecimal digits")
	}
	p.i += 4
	return rune(n), nil
}

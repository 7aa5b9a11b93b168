package vcon

import (
	"bufio"
	"errors"
	"io"
)

// ErrOverLimit is WithoutDialogBodies' error when what is left of the
// vCon is still larger than its limit.
var ErrOverLimit = errors.New("vcon: over the limit without its dialog bodies")

// WithoutDialogBodies reads an unsigned vCon's JSON from r and returns it
// with the value of every dialog's body replaced by null, white space
// outside strings left out, and how many bodies it dropped. It streams:
// what it holds is what it returns, at most limit bytes, so a vCon of any
// size whose bodies are most of it (a recording inline) is read in
// bounded memory; ErrOverLimit when the rest is still over limit. The
// JSON is the server's own, checked at store (Inspect): anything else is
// refused with an error, never repaired.
func WithoutDialogBodies(r io.Reader, limit int64) ([]byte, int, error) {
	t := &trimmer{r: bufio.NewReaderSize(r, bufSize), limit: limit}
	if b, _ := t.r.Peek(len(utf8BOM)); string(b) == utf8BOM {
		t.r.Discard(len(utf8BOM)) // kept at store, left out here as white space is
	}
	if err := t.value(atRoot, 0); err != nil {
		return nil, 0, err
	}
	if _, err := t.next(); err != io.EOF {
		return nil, 0, errors.New("vcon: more after the vCon's JSON")
	}
	return t.out, t.dropped, nil
}

// Where a value sits, as far as finding dialog bodies needs.
const (
	atOther      = iota
	atRoot       // the vCon's object
	atDialog     // its dialog array
	atDialogItem // one dialog
)

type trimmer struct {
	r       *bufio.Reader
	limit   int64
	out     []byte
	dropped int
}

var errNotJSON = errors.New("vcon: not the JSON of a vCon")

func (t *trimmer) emit(b ...byte) error {
	if int64(len(t.out)+len(b)) > t.limit {
		return ErrOverLimit
	}
	t.out = append(t.out, b...)
	return nil
}

// next is the next byte that is not white space.
func (t *trimmer) next() (byte, error) {
	for {
		c, err := t.r.ReadByte()
		if err != nil || (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
			return c, err
		}
	}
}

func (t *trimmer) value(at, depth int) error {
	if depth > maxDepth {
		return errNotJSON
	}
	c, err := t.next()
	if err != nil {
		return errNotJSON
	}
	switch c {
	case '{':
		return t.object(at, depth)
	case '[':
		return t.array(at, depth)
	case '"':
		_, err := t.str(true)
		return err
	}
	return t.scalar(c, true)
}

func (t *trimmer) object(at, depth int) error {
	if err := t.emit('{'); err != nil {
		return err
	}
	for first := true; ; first = false {
		c, err := t.next()
		switch {
		case err != nil:
			return errNotJSON
		case c == '}' && first:
			return t.emit('}')
		case c != '"':
			return errNotJSON
		}
		key, err := t.str(true)
		if err != nil {
			return err
		}
		if c, err := t.next(); err != nil || c != ':' {
			return errNotJSON
		}
		if err := t.emit(':'); err != nil {
			return err
		}
		switch {
		case at == atDialogItem && key == "body":
			t.dropped++
			if err := t.emit('n', 'u', 'l', 'l'); err != nil {
				return err
			}
			err = t.skip(depth)
		case at == atRoot && key == "dialog":
			err = t.value(atDialog, depth+1)
		default:
			err = t.value(atOther, depth+1)
		}
		if err != nil {
			return err
		}
		c, err = t.next()
		if err != nil || (c != ',' && c != '}') {
			return errNotJSON
		}
		if err := t.emit(c); err != nil || c == '}' {
			return err
		}
	}
}

func (t *trimmer) array(at, depth int) error {
	if err := t.emit('['); err != nil {
		return err
	}
	item := atOther
	if at == atDialog {
		item = atDialogItem
	}
	c, err := t.next()
	if err != nil {
		return errNotJSON
	}
	if c == ']' {
		return t.emit(']')
	}
	t.r.UnreadByte()
	for {
		if err := t.value(item, depth+1); err != nil {
			return err
		}
		c, err := t.next()
		if err != nil || (c != ',' && c != ']') {
			return errNotJSON
		}
		if err := t.emit(c); err != nil || c == ']' {
			return err
		}
	}
}

// str reads a string whose opening quote is read, emitting it when keep,
// and returns its first bytes as written (a member's name).
func (t *trimmer) str(keep bool) (string, error) {
	if keep {
		if err := t.emit('"'); err != nil {
			return "", err
		}
	}
	var name []byte
	for {
		c, err := t.r.ReadByte()
		if err != nil {
			return "", errNotJSON
		}
		if keep {
			if err := t.emit(c); err != nil {
				return "", err
			}
		}
		switch c {
		case '"':
			return string(name), nil
		case '\\':
			e, err := t.r.ReadByte()
			if err != nil {
				return "", errNotJSON
			}
			if keep {
				if err := t.emit(e); err != nil {
					return "", err
				}
			}
			c = e
		}
		if len(name) < maxKey {
			name = append(name, c)
		}
	}
}

// scalar reads a number, true, false or null that starts with c.
func (t *trimmer) scalar(c byte, keep bool) error {
	if !(c == '-' || c >= '0' && c <= '9' || c == 't' || c == 'f' || c == 'n') {
		return errNotJSON
	}
	for {
		if keep {
			if err := t.emit(c); err != nil {
				return err
			}
		}
		var err error
		if c, err = t.r.ReadByte(); err == io.EOF {
			return nil
		} else if err != nil {
			return errNotJSON
		}
		switch c {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			t.r.UnreadByte()
			return nil
		case '{', '[', '"', ':':
			return errNotJSON
		}
	}
}

// skip reads a value and keeps none of it.
func (t *trimmer) skip(depth int) error {
	c, err := t.next()
	if err != nil {
		return errNotJSON
	}
	switch c {
	case '"':
		_, err := t.str(false)
		return err
	case '{', '[':
		for open := 1; open > 0; {
			if depth+open > maxDepth {
				return errNotJSON
			}
			c, err := t.next()
			switch {
			case err != nil:
				return errNotJSON
			case c == '"':
				if _, err := t.str(false); err != nil {
					return err
				}
			case c == '{' || c == '[':
				open++
			case c == '}' || c == ']':
				open--
			}
		}
		return nil
	}
	return t.scalar(c, false)
}

package vcon

import "fmt"

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

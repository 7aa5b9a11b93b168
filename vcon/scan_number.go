package vcon

import "fmt"

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
		return s.unexpected(c, "a digit"+s.notJSONNumber())
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

package lawfulbasis

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
)

// JCS, the JSON Canonicalization Scheme (RFC 8785), for the values decode
// returns: what a body's content_hash is computed over. Three rules make
// it canonical: no white space; numbers written as ECMAScript's
// Number.prototype.toString writes a double (RFC 8785, section 3.2.2.3);
// strings with only the escapes of section 3.2.2.2; object members
// sorted by their names as arrays of UTF-16 code units (section 3.2.3).

// Canonical returns the JCS form of the JSON text b. It refuses what JCS
// cannot canonicalise (a repeated member, a lone surrogate, invalid UTF-8,
// a number beyond a double's range).
func Canonical(b []byte) ([]byte, error) {
	v, err := decode(b)
	if err != nil {
		return nil, err
	}
	return appendJCS(nil, v), nil
}

func appendJCS(out []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(out, "null"...)
	case bool:
		return strconv.AppendBool(out, v)
	case number:
		return append(out, esNumber(float64(v))...)
	case string:
		return appendJCSString(out, v)
	case []any:
		out = append(out, '[')
		for i, e := range v {
			if i > 0 {
				out = append(out, ',')
			}
			out = appendJCS(out, e)
		}
		return append(out, ']')
	case *object:
		order := make([]int, len(v.names))
		keys := make([][]uint16, len(v.names))
		for i, n := range v.names {
			order[i], keys[i] = i, utf16.Encode([]rune(n))
		}
		slices.SortFunc(order, func(a, b int) int { return slices.Compare(keys[a], keys[b]) })
		out = append(out, '{')
		for j, i := range order {
			if j > 0 {
				out = append(out, ',')
			}
			out = appendJCSString(out, v.names[i])
			out = append(out, ':')
			out = appendJCS(out, v.vals[i])
		}
		return append(out, '}')
	}
	panic("lawfulbasis: a value decode does not make")
}

// appendJCSString writes s with the escapes of RFC 8785, section
// 3.2.2.2: the two-character ones for ", \, BS, FF, LF, CR and TAB, \u00xx
// in lower case for the other controls, every other character as itself.
func appendJCSString(out []byte, s string) []byte {
	const hex = "0123456789abcdef"
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			out = append(out, '\\', '"')
		case '\\':
			out = append(out, '\\', '\\')
		case '\b':
			out = append(out, '\\', 'b')
		case '\f':
			out = append(out, '\\', 'f')
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		default:
			if c < 0x20 {
				out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			} else {
				out = append(out, c)
			}
		}
	}
	return append(out, '"')
}

// esNumber writes f as ECMAScript's Number::toString does (ECMA-262,
// 7.1.12.1; RFC 8785, section 3.2.2.3): the shortest digits that read
// back as f (what strconv gives too), placed in plain notation for
// exponents from -7 to 20 and in exponent notation outside. -0 is "0".
// decode never makes a NaN or an infinity.
func esNumber(f float64) string {
	if f == 0 {
		return "0"
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		panic("lawfulbasis: JCS has no NaN or infinity")
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	// d.ddddde±x: the k significant digits and n, the position of the
	// decimal point after the first digit (the value is digits × 10^(n−k)).
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	k, n := len(digits), x+1
	var s string
	switch {
	case k <= n && n <= 21:
		s = digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		s = digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		s = "0." + strings.Repeat("0", -n) + digits
	default:
		s = digits[:1]
		if k > 1 {
			s += "." + digits[1:]
		}
		es := "+"
		if n-1 < 0 {
			es = "-"
		}
		s += "e" + es + strconv.Itoa(abs(n-1))
	}
	return sign + s
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}

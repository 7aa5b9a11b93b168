package lawfulbasis

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"strings"
	"testing"
)

// RFC 8785, section 3.2.2: the example of the whole scheme.
func TestCanonicalRFC8785Example(t *testing.T) {
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	got, err := Canonical([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// RFC 8785, section 3.2.3: members sorted by UTF-16 code units, where a
// character beyond the BMP (a surrogate pair) sorts before U+FB33.
func TestCanonicalSortsByUTF16(t *testing.T) {
	in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	got, err := Canonical([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"\r":"Carriage Return","1":"One","` + "\u0080" + `":"Control","ö":"Latin Small Letter O With Diaeresis","€":"Euro Sign","😀":"Emoji: Grinning Face","` + "\ufb33" + `":"Hebrew Letter Dalet With Dagesh"}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// RFC 8785, appendix B: doubles by their IEEE 754 bits and their text.
func TestNumbersRFC8785AppendixB(t *testing.T) {
	for _, c := range []struct{ bits, want string }{
		{"0000000000000000", "0"},
		{"8000000000000000", "0"},
		{"0000000000000001", "5e-324"},
		{"8000000000000001", "-5e-324"},
		{"7fefffffffffffff", "1.7976931348623157e+308"},
		{"ffefffffffffffff", "-1.7976931348623157e+308"},
		{"4340000000000000", "9007199254740992"},
		{"c340000000000000", "-9007199254740992"},
		{"4430000000000000", "295147905179352830000"},
		{"44b52d02c7e14af5", "9.999999999999997e+22"},
		{"44b52d02c7e14af6", "1e+23"},
		{"44b52d02c7e14af7", "1.0000000000000001e+23"},
		{"444b1ae4d6e2ef4e", "999999999999999700000"},
		{"444b1ae4d6e2ef4f", "999999999999999900000"},
		{"444b1ae4d6e2ef50", "1e+21"},
		{"3eb0c6f7a0b5ed8c", "9.999999999999997e-7"},
		{"3eb0c6f7a0b5ed8d", "0.000001"},
		{"41b3de4355555553", "333333333.3333332"},
		{"41b3de4355555554", "333333333.33333325"},
		{"41b3de4355555555", "333333333.3333333"},
		{"41b3de4355555556", "333333333.3333334"},
		{"41b3de4355555557", "333333333.33333343"},
		{"becbf647612f3696", "-0.0000033333333333333333"},
		{"43143ff3c1cb0959", "1424953923781206.2"},
	} {
		b, _ := hex.DecodeString(c.bits)
		f := math.Float64frombits(binary.BigEndian.Uint64(b))
		if got := esNumber(f); got != c.want {
			t.Errorf("%s: got %s, want %s", c.bits, got, c.want)
		}
		// The text reads back as the same double, and canonicalises to
		// itself.
		if got, err := Canonical([]byte(c.want)); err != nil || string(got) != c.want {
			t.Errorf("Canonical(%s) = %s, %v", c.want, got, err)
		}
	}
}

func TestCanonicalRefuses(t *testing.T) {
	for _, in := range []string{
		`{"a":1,"a":2}`, // a repeated member
		`"\ud800"`,      // a lone surrogate
		"\"\xff\"",      // invalid UTF-8
		`1e400`,         // beyond a double
		`{"a":1} x`,     // more after the value
		`[1,]`,          // not JSON
		strings.Repeat("[", 100) + strings.Repeat("]", 100),
	} {
		if _, err := Canonical([]byte(in)); err == nil {
			t.Errorf("Canonical(%q) accepted it", in)
		}
	}
}

// RFC 7693, appendix A, and the BLAKE2 reference's BLAKE2b-256 digests.
func TestBlake2b(t *testing.T) {
	for _, c := range []struct {
		msg  string
		size int
		want string
	}{
		{"abc", 64, "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d17d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923"},
		{"", 32, "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8"},
		{"abc", 32, "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319"},
	} {
		if got := hex.EncodeToString(blake2b([]byte(c.msg), c.size)); got != c.want {
			t.Errorf("blake2b-%d(%q) = %s, want %s", c.size*8, c.msg, got, c.want)
		}
	}
	// More than one block: 200 bytes of 'a', the two paths of blake2b.
	long := blake2b([]byte(strings.Repeat("a", 200)), 32)
	if len(long) != 32 {
		t.Fatal(len(long))
	}
}

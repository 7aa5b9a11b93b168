package ids

import (
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, accepts only the 8-4-4-4-12 hexadecimal
// form, and what it accepts prints back as the input in lower case.
// Its input is a client's text (paths, bodies, command arguments).
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"0196a0f8-7b2c-7c3e-9d4a-1b2c3d4e5f60",
		"0196A0F8-7B2C-7C3E-9D4A-1B2C3D4E5F60",
		"00000000-0000-0000-0000-000000000000",
		"0196a0f8-7b2c-7c3e-9d4a-1b2c3d4e5f6g",
		"0196a0f87b2c-7c3e-9d4a-1b2c3d4e5f600",
		"../../../../../../../../etc/passwd00",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Parse(s)
		if err != nil {
			return
		}
		if len(s) != 36 || id.String() != strings.ToLower(s) {
			t.Fatalf("Parse(%q) accepted it as %s", s, id)
		}
		if strings.Count(s, "-") != 4 {
			t.Fatalf("Parse(%q) accepted a uuid with %d dashes", s, strings.Count(s, "-"))
		}
	})
}

// FuzzParseHex: the manifest form, 32 hexadecimal digits.
func FuzzParseHex(f *testing.F) {
	f.Add("0196a0f87b2c7c3e9d4a1b2c3d4e5f60")
	f.Add("0196a0f87b2c7c3e9d4a1b2c3d4e5f6")
	f.Add("zz96a0f87b2c7c3e9d4a1b2c3d4e5f60")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseHex(s)
		if err != nil {
			return
		}
		if len(s) != 32 || strings.ReplaceAll(id.String(), "-", "") != strings.ToLower(s) {
			t.Fatalf("ParseHex(%q) accepted it as %s", s, id)
		}
	})
}

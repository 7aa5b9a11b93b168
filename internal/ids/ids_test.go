package ids

import (
	"bytes"
	"testing"
	"time"
)

func TestParseRoundTrip(t *testing.T) {
	id := NewRandom()
	got, err := Parse(id.String())
	if err != nil || got != id {
		t.Fatalf("Parse(%s) = %v, %v", id, got, err)
	}
	up, err := Parse("0196A0F8-7B2C-7C3E-9D4A-1B2C3D4E5F60")
	if err != nil || up.String() != "0196a0f8-7b2c-7c3e-9d4a-1b2c3d4e5f60" {
		t.Fatalf("upper case: %v %v", up, err)
	}
	for _, bad := range []string{"", "x", "0196a0f8-7b2c-7c3e-9d4a-1b2c3d4e5f6", "0196a0f8-7b2c-7c3e-9d4a-1b2c3d4e5f6g", "0196a0f87b2c-7c3e-9d4a-1b2c3d4e5f600", "../../../../../../../../etc/passwd00"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestV7Sorts(t *testing.T) {
	now := time.Now()
	prev := NewV7(now)
	for i := 0; i < 10000; i++ {
		next := NewV7(now)
		if bytes.Compare(prev[:], next[:]) >= 0 {
			t.Fatalf("%s not after %s", next, prev)
		}
		prev = next
	}
	if prev[6]>>4 != 7 || prev[8]>>6 != 2 {
		t.Fatalf("version/variant bits wrong: %s", prev)
	}
}

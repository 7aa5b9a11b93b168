package vcon

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestSpecial checks the eight-bytes-at-a-time test against the byte table.
func TestSpecial(t *testing.T) {
	slow := func(w uint64) bool {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], w)
		for _, c := range b {
			if !plain[c] {
				return true
			}
		}
		return false
	}
	for _, bg := range []byte{'a', 0x20, 0xff, 0x80, '"' + 1, '\\' + 1, '\\' - 1} {
		for pos := range 8 {
			for c := range 256 {
				var b [8]byte
				for i := range b {
					b[i] = bg
				}
				b[pos] = byte(c)
				w := binary.LittleEndian.Uint64(b[:])
				if special(w) != slow(w) {
					t.Fatalf("special(% x) = %v", b, special(w))
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1_000_000 {
		w := r.Uint64()
		if special(w) != slow(w) {
			t.Fatalf("special(%016x) = %v", w, special(w))
		}
	}
}

package seal

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzOpen feeds arbitrary bytes to NewReader under a fixed key. Sealing is
// deterministic for a given key and ids, so the oracle is exact: a stream
// opens without error only if it is byte for byte the sealed form of what it
// opened to, and any plaintext released before an error is whole chunks
// whose sealed form is the start of the input.
//
// A multi-chunk input is over 64 KiB, which the fuzzer minimizes slowly
// (up to a minute per new input by default); cap that when fuzzing:
//
//	go test -run '^$' -fuzz FuzzOpen -fuzzminimizetime 5s ./seal/
func FuzzOpen(f *testing.F) {
	dk := DataKey{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}
	for _, p := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("vcon "), 40), make([]byte, ChunkSize+3)} {
		f.Add(sealBytes(f, p, dk, tenantA, version1))
	}
	f.Add([]byte("VCONSEAL\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data), dk, tenantA, version1)
		if err != nil {
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("NewReader error does not wrap ErrDamaged: %v", err)
			}
			return
		}
		out, err := io.ReadAll(r)
		if err == nil {
			if !bytes.Equal(sealBytes(t, out, dk, tenantA, version1), data) {
				t.Fatal("opened an input that is not the sealed form of its plaintext")
			}
			return
		}
		if !errors.Is(err, ErrDamaged) {
			t.Fatalf("read error does not wrap ErrDamaged: %v", err)
		}
		if len(out)%ChunkSize != 0 {
			t.Fatalf("released %d bytes before an error: not whole chunks", len(out))
		}
		// Whole chunks of a longer plaintext are sealed as non-final ones.
		prefix := sealBytes(t, append(out, 0), dk, tenantA, version1)
		prefix = prefix[:HeaderSize+len(out)/ChunkSize*chunkLen]
		if !bytes.HasPrefix(data, prefix) {
			t.Fatal("released plaintext that the input did not seal")
		}
	})
}

package objstore

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"io"
	"math/rand/v2"
	"os"
	"testing"
)

// readFrom rewinds r to off and reads to its end.
func readFrom(t *testing.T, r io.ReadSeeker, off int64) []byte {
	t.Helper()
	if _, err := r.Seek(off, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestUploadBodyStaysInMemory(t *testing.T) {
	dir := t.TempDir()
	b := newUploadBody(dir)
	defer b.release()
	clearText := bytes.Repeat([]byte("a sealed vCon "), 300)
	b.Write(clearText)
	if b.spool != nil {
		t.Fatal("a 4 KiB upload went to a spool file")
	}
	if got := readFrom(t, b.reader(), 0); !bytes.Equal(got, clearText) {
		t.Fatal("the memory body reads back wrong")
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("files in the spool folder: %v", left)
	}
}

// TestUploadBodySpills: above the bound the bytes go to a spool file that
// has no name and holds no clear byte, and read back whole from any
// offset, as many times as a retry asks.
func TestUploadBodySpills(t *testing.T) {
	dir := t.TempDir()
	b := newUploadBody(dir)
	defer b.release()
	var want []byte
	line := []byte("clear Parquet column value 0123456789\n")
	for len(want) <= memLimit+100_000 {
		// Writes of many sizes, so the bound falls inside one.
		n := rand.IntN(5000) + 1
		chunk := bytes.Repeat(line, n/len(line)+1)[:n]
		if _, err := b.Write(chunk); err != nil {
			t.Fatal(err)
		}
		want = append(want, chunk...)
	}
	if b.spool == nil || b.mem != nil {
		t.Fatal("a body above the memory bound did not spill")
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the spool file has a name: %v", left)
	}
	raw := make([]byte, b.spool.size)
	if _, err := b.spool.f.ReadAt(raw, 0); err != nil {
		t.Fatal(err)
	}
	if int64(len(want)) != b.spool.size || bytes.Contains(raw, line[:16]) {
		t.Fatalf("the spool file holds clear bytes (or %d of %d)", b.spool.size, len(want))
	}
	r := b.reader()
	if got := readFrom(t, r, 0); !bytes.Equal(got, want) {
		t.Fatal("the spool reads back wrong")
	}
	for _, off := range []int64{0, 1, 15, 16, 17, memLimit - 1, memLimit, memLimit + 7, int64(len(want)) - 1, int64(len(want))} {
		if got := readFrom(t, r, off); !bytes.Equal(got, want[off:]) {
			t.Fatalf("read from %d: wrong bytes", off)
		}
	}
	// Partial reads, then a rewind, as an attempt cut short and its retry.
	r2 := b.reader()
	io.CopyN(io.Discard, r2, 12345)
	if got := readFrom(t, r2, 0); !bytes.Equal(got, want) {
		t.Fatal("a rewound reader reads back wrong")
	}
}

// TestSpoolCounterCarries: the reader's key stream at an offset matches
// the writer's when the counter carries across the IV's bytes.
func TestSpoolCounterCarries(t *testing.T) {
	for _, tail := range [][]byte{{0xff}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}, bytes.Repeat([]byte{0xff}, 16)} {
		s, err := newSealedFile(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		copy(s.iv[aes.BlockSize-len(tail):], tail)
		s.w = cipher.NewCTR(s.block, s.iv[:])
		want := bytes.Repeat([]byte("0123456789abcdef"), 4096)
		want = append(want, "tail"...)
		if _, err := s.Write(want); err != nil {
			t.Fatal(err)
		}
		r := &sealedReader{s: s}
		for _, off := range []int64{0, 5, 16 * 255, 16*256 + 3, 16 * 4095, int64(len(want)) - 2} {
			if got := readFrom(t, r, off); !bytes.Equal(got, want[off:]) {
				t.Fatalf("iv tail %x: read from %d: wrong bytes", tail, off)
			}
		}
		s.f.Close()
	}
}

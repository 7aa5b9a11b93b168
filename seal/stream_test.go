package seal

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

var (
	tenantA  = [16]byte{0x01, 0x96, 0xa0, 0xf8, 0x7b, 0x2c, 0x7c, 0x3e, 0x9d, 0x4a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f, 0x60}
	tenantB  = [16]byte{0x01, 0x96, 0xa0, 0xf8, 0x7b, 0x2c, 0x7c, 0x3e, 0x9d, 0x4a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f, 0x61}
	version1 = [16]byte{0x01, 0x97, 0x00, 0x00, 0x00, 0x01, 0x70, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01}
	version2 = [16]byte{0x01, 0x97, 0x00, 0x00, 0x00, 0x01, 0x70, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02}
)

// chunkLen is the sealed length of a full chunk.
const chunkLen = ChunkSize + Overhead

func newKey(t testing.TB) DataKey {
	t.Helper()
	dk, err := NewDataKey()
	if err != nil {
		t.Fatal(err)
	}
	return dk
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// sealBytes seals p in one Write.
func sealBytes(t testing.TB, p []byte, dk DataKey, tenant, version [16]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, dk, tenant, version)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(p); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// open returns all the plaintext released before the first error.
func open(sealed []byte, dk DataKey, tenant, version [16]byte) ([]byte, error) {
	r, err := NewReader(bytes.NewReader(sealed), dk, tenant, version)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// mustDamage checks that sealed does not open, with ErrDamaged, and that
// whatever plaintext was released first is made of whole, genuine chunks.
func mustDamage(t *testing.T, what string, sealed, plain []byte, dk DataKey, tenant, version [16]byte) {
	t.Helper()
	out, err := open(sealed, dk, tenant, version)
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("%s: opened with err = %v, want ErrDamaged", what, err)
	}
	if len(out)%ChunkSize != 0 || !bytes.HasPrefix(plain, out) {
		t.Fatalf("%s: released %d bytes that are not whole genuine chunks", what, len(out))
	}
}

func TestSealedSize(t *testing.T) {
	for _, c := range []struct{ n, want int64 }{
		{0, 25 + 16},
		{1, 25 + 1 + 16},
		{ChunkSize - 1, 25 + ChunkSize - 1 + 16},
		{ChunkSize, 25 + ChunkSize + 16},
		{ChunkSize + 1, 25 + ChunkSize + 1 + 32},
		{64 << 20, 25 + 64<<20 + 1024*16},
	} {
		if got := SealedSize(c.n); got != c.want {
			t.Errorf("SealedSize(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	if HeaderSize != 25 {
		t.Errorf("HeaderSize = %d, want 25", HeaderSize)
	}
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int{0, 1, ChunkSize - 1, ChunkSize, ChunkSize + 1, 2 * ChunkSize, 3 * ChunkSize, 3*ChunkSize + 7}
	for range 6 {
		sizes = append(sizes, rng.IntN(1<<20+1))
	}
	dk := newKey(t)
	for _, n := range sizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			plain := randomBytes(rng, n)
			var buf bytes.Buffer
			w, err := NewWriter(&buf, dk, tenantA, version1)
			if err != nil {
				t.Fatal(err)
			}
			for p := plain; ; {
				// Random write sizes, empty writes and writes that
				// straddle chunk boundaries included.
				k := min(len(p), rng.IntN(3*ChunkSize/2))
				if _, err := w.Write(p[:k]); err != nil {
					t.Fatal(err)
				}
				p = p[k:]
				if len(p) == 0 {
					break
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			sealed := buf.Bytes()
			if int64(len(sealed)) != SealedSize(int64(n)) {
				t.Fatalf("sealed %d bytes, SealedSize says %d", len(sealed), SealedSize(int64(n)))
			}
			if one := sealBytes(t, plain, dk, tenantA, version1); !bytes.Equal(one, sealed) {
				t.Fatal("sealing depends on how the plaintext was written")
			}
			// Read back with reads of random sizes.
			r, err := NewReader(bytes.NewReader(sealed), dk, tenantA, version1)
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			for {
				p := make([]byte, 1+rng.IntN(2*ChunkSize))
				k, err := r.Read(p)
				got = append(got, p[:k]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got, plain) {
				t.Fatalf("opened %d bytes, not the %d sealed", len(got), len(plain))
			}
			if k, err := r.Read(make([]byte, 10)); k != 0 || err != io.EOF {
				t.Fatalf("read after EOF = %d, %v", k, err)
			}
			if v, err := HeaderVersion(bytes.NewReader(sealed)); err != nil || v != version1 {
				t.Fatalf("HeaderVersion = %x, %v", v, err)
			}
		})
	}
}

// TestFormatAsDocumented opens a sealed object with nothing but the package
// comment's description, so the code and the written format cannot drift.
func TestFormatAsDocumented(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	dk := newKey(t)
	plain := randomBytes(rng, 2*ChunkSize+10)
	sealed := sealBytes(t, plain, dk, tenantA, version1)

	wantHeader := append([]byte("VCONSEAL\x01"), version1[:]...)
	if !bytes.Equal(sealed[:25], wantHeader) {
		t.Fatalf("header = %x, want %x", sealed[:25], wantHeader)
	}
	block, _ := aes.NewCipher(dk[:])
	gcm, _ := cipher.NewGCM(block)
	ad := append(append([]byte{}, wantHeader...), tenantA[:]...)
	body := sealed[25:]
	var got []byte
	for i := 0; len(body) > 0; i++ {
		n := min(len(body), ChunkSize+16)
		nonce := make([]byte, 12)
		nonce[10] = byte(i) // 11-byte big-endian counter
		if n == len(body) {
			nonce[11] = 1
		}
		p, err := gcm.Open(nil, nonce, body[:n], ad)
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		got = append(got, p...)
		body = body[n:]
	}
	if !bytes.Equal(got, plain) {
		t.Fatal("plaintext differs")
	}
}

func TestBitFlipsSmall(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	dk := newKey(t)
	plain := randomBytes(rng, 200)
	sealed := sealBytes(t, plain, dk, tenantA, version1)
	for i := range len(sealed) * 8 {
		bad := bytes.Clone(sealed)
		bad[i/8] ^= 1 << (i % 8)
		mustDamage(t, fmt.Sprintf("bit %d flipped", i), bad, plain, dk, tenantA, version1)
	}
}

func TestBitFlipsMultiChunk(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	dk := newKey(t)
	plain := randomBytes(rng, 3*ChunkSize+100)
	sealed := sealBytes(t, plain, dk, tenantA, version1)
	bits := []int{}
	for range 300 {
		bits = append(bits, rng.IntN(len(sealed)*8))
	}
	// Every bit of the header and of the bytes around each chunk boundary.
	for i := range HeaderSize * 8 {
		bits = append(bits, i)
	}
	for b := HeaderSize + chunkLen; b < len(sealed); b += chunkLen {
		for i := (b - 17) * 8; i < (b+1)*8; i++ {
			bits = append(bits, i)
		}
	}
	for _, i := range bits {
		bad := bytes.Clone(sealed)
		bad[i/8] ^= 1 << (i % 8)
		mustDamage(t, fmt.Sprintf("bit %d flipped", i), bad, plain, dk, tenantA, version1)
	}
}

func TestTruncation(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	dk := newKey(t)
	// A short final chunk, and a full one (a multiple of ChunkSize).
	for _, n := range []int{0, 100, 3*ChunkSize + 100, 2 * ChunkSize} {
		plain := randomBytes(rng, n)
		sealed := sealBytes(t, plain, dk, tenantA, version1)
		cuts := []int{len(sealed) - 1}
		for i := range HeaderSize {
			cuts = append(cuts, i)
		}
		for b := HeaderSize; b < len(sealed); b += chunkLen {
			for _, d := range []int{0, 1, 15, 16, 17, ChunkSize / 2, chunkLen - 1} {
				if b+d < len(sealed) {
					cuts = append(cuts, b+d)
				}
			}
		}
		for _, c := range cuts {
			mustDamage(t, fmt.Sprintf("%d-byte plaintext cut at %d", n, c), sealed[:c], plain, dk, tenantA, version1)
		}
	}
}

func TestAppended(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	dk := newKey(t)
	for _, n := range []int{0, 100, ChunkSize, 2*ChunkSize + 5} {
		plain := randomBytes(rng, n)
		sealed := sealBytes(t, plain, dk, tenantA, version1)
		mustDamage(t, "one byte appended", append(bytes.Clone(sealed), 0), plain, dk, tenantA, version1)
		last := sealed[HeaderSize+(len(sealed)-HeaderSize-1)/chunkLen*chunkLen:]
		mustDamage(t, "final chunk repeated", append(bytes.Clone(sealed), last...), plain, dk, tenantA, version1)
		mustDamage(t, "object repeated", append(bytes.Clone(sealed), sealed...), plain, dk, tenantA, version1)
	}
}

// chunk returns the bounds of sealed chunk i.
func chunk(sealed []byte, i int) []byte {
	start := HeaderSize + i*chunkLen
	return sealed[start:min(start+chunkLen, len(sealed))]
}

func TestMovedChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	dk, other := newKey(t), newKey(t)
	plain := randomBytes(rng, 3*ChunkSize+100)
	sealed := sealBytes(t, plain, dk, tenantA, version1)

	swapped := bytes.Clone(sealed)
	copy(chunk(swapped, 0), chunk(sealed, 1))
	copy(chunk(swapped, 1), chunk(sealed, 0))
	mustDamage(t, "chunks 0 and 1 swapped", swapped, plain, dk, tenantA, version1)

	dropped := append(bytes.Clone(sealed[:HeaderSize+chunkLen]), sealed[HeaderSize+2*chunkLen:]...)
	mustDamage(t, "chunk 1 dropped", dropped, plain, dk, tenantA, version1)

	// The same key and plaintext under another version id gives the same
	// ciphertext (same key, same nonces): only the associated data tells
	// the chunks apart, which is what this proves. (Writers never reuse a
	// data key; see NewWriter.)
	for _, src := range []struct {
		what   string
		sealed []byte
	}{
		{"same key, same plaintext, other version", sealBytes(t, plain, dk, tenantA, version2)},
		{"same key, other plaintext, other version", sealBytes(t, randomBytes(rng, len(plain)), dk, tenantA, version2)},
		{"same key and version, other tenant", sealBytes(t, plain, dk, tenantB, version1)},
		{"other key", sealBytes(t, plain, other, tenantA, version1)},
	} {
		for i := range 4 {
			bad := bytes.Clone(sealed)
			copy(chunk(bad, i), chunk(src.sealed, i))
			mustDamage(t, fmt.Sprintf("chunk %d from an object of %s", i, src.what), bad, plain, dk, tenantA, version1)
		}
	}
}

func TestWrongParameters(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	dk := newKey(t)
	for _, n := range []int{0, 10, ChunkSize + 10} {
		plain := randomBytes(rng, n)
		sealed := sealBytes(t, plain, dk, tenantA, version1)
		mustDamage(t, "wrong tenant", sealed, plain, dk, tenantB, version1)
		mustDamage(t, "wrong version", sealed, plain, dk, tenantA, version2)
		mustDamage(t, "wrong data key", sealed, plain, newKey(t), tenantA, version1)

		// The header of another version: its chunks are bound to their
		// own header, and a reader expecting version1 refuses at once.
		other := sealBytes(t, plain, dk, tenantA, version2)
		bad := append(bytes.Clone(other[:HeaderSize]), sealed[HeaderSize:]...)
		mustDamage(t, "header of another version", bad, plain, dk, tenantA, version2)
		mustDamage(t, "header of another version", bad, plain, dk, tenantA, version1)

		badMagic := bytes.Clone(sealed)
		copy(badMagic, "VCONSEAM")
		mustDamage(t, "bad magic", badMagic, plain, dk, tenantA, version1)
		badFormat := bytes.Clone(sealed)
		badFormat[8] = 2
		mustDamage(t, "format 2", badFormat, plain, dk, tenantA, version1)
	}
}

// TestEmptyFinalChunkRefused builds the other spelling of a plaintext that
// is a multiple of ChunkSize (full chunks, then an empty final one), which a
// writer never makes: each plaintext has one sealed form.
func TestEmptyFinalChunkRefused(t *testing.T) {
	dk := newKey(t)
	plain := bytes.Repeat([]byte{7}, 2*ChunkSize)
	s, err := newStreamState(dk, tenantA, version1)
	if err != nil {
		t.Fatal(err)
	}
	sealed := bytes.Clone(s.header())
	for i, last := range []bool{false, false, true} {
		s.nextNonce(last)
		p := plain[min(len(plain), i*ChunkSize):min(len(plain), (i+1)*ChunkSize)]
		sealed = s.aead.Seal(sealed, s.nonce[:], p, s.ad[:])
	}
	mustDamage(t, "empty final chunk after full ones", sealed, plain, dk, tenantA, version1)
}

func TestChunkLimit(t *testing.T) {
	dk := newKey(t)
	w, err := NewWriter(io.Discard, dk, tenantA, version1)
	if err != nil {
		t.Fatal(err)
	}
	w.(*writer).s.counter = maxChunks - 1
	if _, err := w.Write(make([]byte, ChunkSize+1)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("Close past the chunk limit = %v", err)
	}

	sealed := sealBytes(t, []byte("x"), dk, tenantA, version1)
	r, err := NewReader(bytes.NewReader(sealed), dk, tenantA, version1)
	if err != nil {
		t.Fatal(err)
	}
	r.(*reader).s.counter = maxChunks
	if _, err := io.ReadAll(r); !errors.Is(err, ErrDamaged) {
		t.Fatalf("read past the chunk limit = %v", err)
	}
}

func TestHeaderVersion(t *testing.T) {
	sealed := sealBytes(t, []byte("hello"), newKey(t), tenantA, version2)
	if v, err := HeaderVersion(bytes.NewReader(sealed)); err != nil || v != version2 {
		t.Fatalf("HeaderVersion = %x, %v", v, err)
	}
	for _, bad := range [][]byte{nil, sealed[:HeaderSize-1], []byte(strings.Repeat("x", 100)), append([]byte("VCONSEAL\x02"), sealed[9:]...)} {
		if _, err := HeaderVersion(bytes.NewReader(bad)); !errors.Is(err, ErrDamaged) {
			t.Errorf("HeaderVersion(%q) = %v, want ErrDamaged", bad, err)
		}
	}
}

type failWriter struct{ after int }

var errDisk = errors.New("disk full")

func (f *failWriter) Write(p []byte) (int, error) {
	if f.after < len(p) {
		return 0, errDisk
	}
	f.after -= len(p)
	return len(p), nil
}

func TestWriterErrors(t *testing.T) {
	dk := newKey(t)
	if _, err := NewWriter(&failWriter{}, dk, tenantA, version1); !errors.Is(err, errDisk) {
		t.Fatalf("NewWriter on a failing writer = %v", err)
	}
	w, err := NewWriter(&failWriter{after: HeaderSize}, dk, tenantA, version1)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w.Write(make([]byte, 2*ChunkSize)); !errors.Is(err, errDisk) || n != ChunkSize {
		t.Fatalf("Write = %d, %v; want %d, disk full", n, err, ChunkSize)
	}
	if _, err := w.Write([]byte("x")); !errors.Is(err, errDisk) {
		t.Fatalf("Write after a failure = %v", err)
	}
	if err := w.Close(); !errors.Is(err, errDisk) {
		t.Fatalf("Close after a failure = %v", err)
	}

	w, _ = NewWriter(io.Discard, dk, tenantA, version1)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if _, err := w.Write([]byte("x")); err == nil {
		t.Fatal("Write after Close succeeded")
	}
}

type failReader struct {
	r     io.Reader
	after int
}

func (f *failReader) Read(p []byte) (int, error) {
	if f.after == 0 {
		return 0, errDisk
	}
	p = p[:min(len(p), f.after)]
	n, err := f.r.Read(p)
	f.after -= n
	return n, err
}

func TestReaderIOError(t *testing.T) {
	dk := newKey(t)
	sealed := sealBytes(t, make([]byte, 3*ChunkSize), dk, tenantA, version1)
	for _, after := range []int{3, HeaderSize + 5, HeaderSize + chunkLen + 1} {
		r, err := NewReader(&failReader{bytes.NewReader(sealed), after}, dk, tenantA, version1)
		if err == nil {
			_, err = io.ReadAll(r)
		}
		if !errors.Is(err, errDisk) || errors.Is(err, ErrDamaged) {
			t.Fatalf("I/O error after %d bytes: %v", after, err)
		}
	}
}

// repeatReader yields n bytes cycling through pattern, without allocating.
type repeatReader struct {
	pattern []byte
	off, n  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	p = p[:min(len(p), r.n)]
	k := 0
	for k < len(p) {
		c := copy(p[k:], r.pattern[r.off:])
		k += c
		r.off = (r.off + c) % len(r.pattern)
	}
	r.n -= k
	return k, nil
}

// sliceWriter appends into preallocated storage, so the test measures the
// package's allocations, not a growing buffer's.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	if len(w.b)+len(p) > cap(w.b) {
		return 0, errors.New("sliceWriter full")
	}
	w.b = append(w.b, p...)
	return len(p), nil
}

// TestMemoryBounded seals and opens streams of 1 MiB and 64 MiB and checks
// that what they allocate is small and does not grow with the size.
func TestMemoryBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	pattern := randomBytes(rng, 1<<20+13)
	dk := newKey(t)
	const big = 64 << 20
	sink := &sliceWriter{b: make([]byte, 0, SealedSize(big))}
	copyBuf := make([]byte, 100_000) // not a divisor of ChunkSize
	wantBuf := make([]byte, len(copyBuf))
	var ms runtime.MemStats

	allocs := func(n int) uint64 {
		sink.b = sink.b[:0]
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc

		w, err := NewWriter(sink, dk, tenantA, version1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.CopyBuffer(w, &repeatReader{pattern: pattern, n: n}, copyBuf); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := NewReader(bytes.NewReader(sink.b), dk, tenantA, version1)
		if err != nil {
			t.Fatal(err)
		}
		// Compare with the pattern as the plaintext streams out.
		want := &repeatReader{pattern: pattern, n: n}
		got := 0
		for {
			k, err := r.Read(copyBuf)
			io.ReadFull(want, wantBuf[:k])
			if !bytes.Equal(copyBuf[:k], wantBuf[:k]) {
				t.Fatalf("plaintext differs near offset %d", got)
			}
			got += k
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if got != n || int64(len(sink.b)) != SealedSize(int64(n)) {
			t.Fatalf("opened %d of %d bytes, sealed %d", got, n, len(sink.b))
		}

		runtime.ReadMemStats(&ms)
		return ms.TotalAlloc - before
	}
	small, large := allocs(1<<20), allocs(big)
	t.Logf("allocated %d bytes for 1 MiB, %d bytes for 64 MiB", small, large)
	if large > 1<<20 {
		t.Errorf("sealing and opening 64 MiB allocated %d bytes, want < 1 MiB", large)
	}
	if large > small+64<<10 {
		t.Errorf("allocation grows with size: %d bytes for 1 MiB, %d for 64 MiB", small, large)
	}
}

func benchSizes() []int { return []int{4 << 10, 16 << 20} }

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

func BenchmarkSeal(b *testing.B) {
	dk := newKey(b)
	for _, n := range benchSizes() {
		b.Run(sizeName(n), func(b *testing.B) {
			plain := make([]byte, n)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				w, err := NewWriter(io.Discard, dk, tenantA, version1)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := w.Write(plain); err != nil {
					b.Fatal(err)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkOpen(b *testing.B) {
	dk := newKey(b)
	for _, n := range benchSizes() {
		b.Run(sizeName(n), func(b *testing.B) {
			sealed := sealBytes(b, make([]byte, n), dk, tenantA, version1)
			src := bytes.NewReader(sealed)
			buf := make([]byte, 32<<10)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				src.Reset(sealed)
				r, err := NewReader(src, dk, tenantA, version1)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.CopyBuffer(io.Discard, r, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

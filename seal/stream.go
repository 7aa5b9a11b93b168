// Package seal encrypts each stored vCon version at rest and wraps the key
// that opens it.
//
// Every version is sealed under a random 256-bit data key of its own. The
// data key is only ever stored wrapped under its tenant's key (tenantkey.go;
// the tenant key wrapped under the master key), in the version's catalog
// row, so destroying that wrapped key (a purge) makes the version
// unreadable for good, in every copy of its sealed bytes: backups, old pack
// files and exports included. Sealing and opening stream in chunks, so memory
// stays O(ChunkSize) whatever the size of the body.
//
// # Sealed object, format 1
//
// All integers are big-endian. A sealed object is a 25-byte header followed
// by one or more sealed chunks:
//
//	offset  size  field
//	0       8     magic, the ASCII bytes "VCONSEAL"
//	8       1     format number, 0x01
//	9       16    version id (the raw 16 bytes of the UUID)
//	25      ...   sealed chunks
//
// The plaintext is cut into chunks of ChunkSize (65536) bytes; the last chunk
// holds the rest, 1 to 65536 bytes. An empty plaintext is one empty chunk; a
// plaintext that is a multiple of 65536 bytes ends with a full chunk, never
// with an extra empty one. Chunk i (counting from 0) is sealed with AES-256-GCM
// under the data key:
//
//	nonce           = i as an 11-byte unsigned integer || flag
//	flag            = 0x01 for the final chunk, 0x00 for every other
//	associated data = the 25 header bytes || tenant id (16 raw bytes)
//	sealed chunk    = ciphertext (as long as the chunk) || 16-byte GCM tag
//
// This is the STREAM construction as age uses it. The counter in the nonce
// stops chunks being reordered, dropped or repeated; the final flag stops the
// stream being cut at a chunk boundary (without it a truncated object would
// open as a shorter, valid plaintext); the associated data stops chunks being
// moved to another object, version or tenant. A sealed object of n plaintext
// bytes is exactly SealedSize(n) = 25 + n + 16*max(1, ceil(n/65536)) bytes.
//
// A writer MUST use a data key for one object only: chunk nonces are
// counters, so two different plaintexts under one data key would share
// nonces, which voids both confidentiality and integrity of AES-GCM. A writer
// MUST NOT seal more than 2^32 chunks (256 TiB) under one key.
//
// A reader MUST check the header (magic, format, the version id it expects)
// before anything else and MUST release no plaintext of a chunk before that
// chunk authenticated. It reads 65536+16 bytes and one more: when the stream
// ends within them, the chunk is the final one and is opened with flag 0x01,
// otherwise with 0x00. It MUST refuse an empty final chunk other than chunk 0,
// so that each plaintext has exactly one sealed form, and it reports the end
// of the plaintext only after the final chunk authenticated with nothing
// after it. Every other outcome is damage (ErrDamaged).
//
// # Wrapped data key, format 1
//
// The catalog row of a version holds its data key wrapped under the master
// key, 61 bytes:
//
//	offset  size  field
//	0       1     format number, 0x01
//	1       12    nonce, random
//	13      48    AES-256-GCM under the master key of the 32-byte data key
//	              (32 bytes of ciphertext || 16-byte tag)
//
// Its associated data is the ASCII label "vcon-server wrapped data key v1"
// || tenant id || version id (16 raw bytes each), so a wrapped key copied
// into another row does not unwrap.
//
// The catalog also holds the master key's check value: the first 16 bytes of
// HMAC-SHA256 keyed with the master key over the ASCII label
// "vcon-server master key check v1". It lets the server tell a wrong master
// key at start without unwrapping anything, and reveals nothing of the key.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

const (
	// ChunkSize is the number of plaintext bytes in every chunk but the last.
	ChunkSize = 64 << 10
	// HeaderSize is the length of the header that starts a sealed object.
	HeaderSize = len(magic) + 1 + 16
	// Overhead is what sealing adds to each chunk: its GCM tag.
	Overhead = 16

	magic         = "VCONSEAL"
	formatVersion = 1
	adSize        = HeaderSize + 16
	// maxChunks keeps one data key well inside AES-GCM's usage limits
	// (about 2^44 blocks gives an attacker an advantage under 2^-40); it
	// allows 256 TiB per object, far beyond any vCon.
	maxChunks = 1 << 32
	// minBuf is where the buffers start. They grow, doubling, to one
	// chunk only as the data needs it, so that a small object (most vCons)
	// does not cost two 64 KiB allocations.
	minBuf = 4 << 10
	// readSize is what the reader reads at most at once: one sealed chunk
	// and one byte of look-ahead.
	readSize = ChunkSize + Overhead + 1
)

// ErrDamaged is wrapped by every failure to open sealed data or unwrap a data
// key: a tag that does not verify, truncation, trailing bytes, a wrong
// header, or a wrong key, tenant or version id. The bytes cannot be told
// apart from damaged ones, and none of their plaintext is released.
var ErrDamaged = errors.New("seal: sealed data failed authentication")

func damaged(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrDamaged, fmt.Sprintf(format, args...))
}

// SealedSize returns the exact length of the sealed object of a plaintext of
// n bytes, so a caller can check a stored length without opening the object.
// n must not be negative.
func SealedSize(n int64) int64 {
	if n < 0 {
		panic("seal: negative plaintext size")
	}
	chunks := (n + ChunkSize - 1) / ChunkSize
	if chunks == 0 {
		chunks = 1 // the empty plaintext still has its (empty) final chunk
	}
	return int64(HeaderSize) + n + chunks*Overhead
}

// HeaderVersion reads only the header of a sealed object and returns the
// version id recorded in it, for check and recovery to match an object with
// its catalog row. It authenticates nothing: the id is only a hint until the
// object opens. It returns an error wrapping ErrDamaged if r does not start
// with a sealed object's header.
func HeaderVersion(r io.Reader) ([16]byte, error) {
	var h [HeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return [16]byte{}, damaged("header truncated")
		}
		return [16]byte{}, fmt.Errorf("seal: read header: %w", err)
	}
	if string(h[:len(magic)]) != magic {
		return [16]byte{}, damaged("not a sealed object (bad magic)")
	}
	if h[len(magic)] != formatVersion {
		return [16]byte{}, damaged("unknown format %d", h[len(magic)])
	}
	return [16]byte(h[len(magic)+1:]), nil
}

// streamState is what writer and reader share: the chunk cipher, the
// associated data and the chunk counter.
type streamState struct {
	aead    cipher.AEAD
	ad      [adSize]byte // header || tenant id
	nonce   [12]byte
	counter uint64
}

func newStreamState(dk DataKey, tenant, version [16]byte) (*streamState, error) {
	block, err := aes.NewCipher(dk[:])
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	s := &streamState{aead: aead}
	n := copy(s.ad[:], magic)
	s.ad[n] = formatVersion
	copy(s.ad[n+1:], version[:])
	copy(s.ad[HeaderSize:], tenant[:])
	return s, nil
}

func (s *streamState) header() []byte { return s.ad[:HeaderSize] }

// nextNonce sets the nonce of the next chunk and counts it.
func (s *streamState) nextNonce(last bool) bool {
	if s.counter >= maxChunks {
		return false
	}
	binary.BigEndian.PutUint64(s.nonce[3:11], s.counter)
	s.nonce[11] = 0
	if last {
		s.nonce[11] = 1
	}
	s.counter++
	return true
}

type writer struct {
	s      *streamState
	dst    io.Writer
	buf    []byte // plaintext of the pending chunk, sealed in place; cap <= ChunkSize+Overhead
	err    error  // sticky: the first write error
	closed bool
}

// NewWriter returns a WriteCloser that writes the sealed form of what is
// written to it into w: the header at once, then each chunk as soon as it is
// known not to be the last. Close seals and writes the final chunk; it must
// be called, and it does not close w. After an error every call returns it.
//
// dk MUST be a fresh key (NewDataKey) used for this object only: chunk
// nonces are counters, so a data key used twice reuses nonces.
func NewWriter(w io.Writer, dk DataKey, tenant, version [16]byte) (io.WriteCloser, error) {
	s, err := newStreamState(dk, tenant, version)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(s.header()); err != nil {
		return nil, fmt.Errorf("seal: write header: %w", err)
	}
	return &writer{s: s, dst: w}, nil
}

func (w *writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.closed {
		return 0, errors.New("seal: write after close")
	}
	n := 0
	for len(p) > 0 {
		// A full chunk is held back until more data arrives, because only
		// then is it known not to be the last one (its nonce says which).
		if len(w.buf) == ChunkSize {
			if err := w.flush(false); err != nil {
				return n, err
			}
		}
		c := min(len(p), ChunkSize-len(w.buf))
		w.reserve(len(w.buf) + c)
		w.buf = append(w.buf, p[:c]...)
		p = p[c:]
		n += c
	}
	return n, nil
}

// Close seals and writes the final chunk. Calling it again returns the
// result of the first call.
func (w *writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err != nil {
		return w.err
	}
	return w.flush(true)
}

// reserve makes room to seal n plaintext bytes in place.
func (w *writer) reserve(n int) {
	if n+Overhead > cap(w.buf) {
		nb := make([]byte, len(w.buf), min(max(n+Overhead, 2*cap(w.buf), minBuf), ChunkSize+Overhead))
		copy(nb, w.buf)
		w.buf = nb
	}
}

func (w *writer) flush(last bool) error {
	w.reserve(len(w.buf))
	if !w.s.nextNonce(last) {
		w.err = fmt.Errorf("seal: object too large (more than %d chunks)", maxChunks)
		return w.err
	}
	sealed := w.s.aead.Seal(w.buf[:0], w.s.nonce[:], w.buf, w.s.ad[:])
	w.buf = w.buf[:0]
	if _, err := w.dst.Write(sealed); err != nil {
		w.err = fmt.Errorf("seal: write chunk: %w", err)
		return w.err
	}
	return nil
}

type reader struct {
	s       *streamState
	src     io.Reader
	buf     []byte // a sealed chunk and a byte of look-ahead; grows to readSize
	grow    int    // the size class of buf (readClassSize)
	plain   []byte // authenticated plaintext not yet returned, within buf
	carry   byte   // the look-ahead byte, which starts the next chunk
	carried bool
	done    bool  // the final chunk authenticated and nothing followed it
	err     error // sticky
}

// NewReader reads the header of a sealed object from r, checks that it is a
// sealed object of the expected version, and returns a Reader of its
// plaintext. A Read returns plaintext only from chunks that authenticated,
// and returns io.EOF only after the final chunk authenticated and r ended
// right after it. Any other ending, and any header or chunk that does not
// verify (wrong key, tenant or version, moved, reordered, altered or cut
// bytes), is an error wrapping ErrDamaged; errors reading r are returned
// wrapped as they are. Errors are sticky.
func NewReader(r io.Reader, dk DataKey, tenant, version [16]byte) (io.Reader, error) {
	got, err := HeaderVersion(r)
	if err != nil {
		return nil, err
	}
	if got != version {
		return nil, damaged("header names another version")
	}
	s, err := newStreamState(dk, tenant, version)
	if err != nil {
		return nil, err
	}
	return &reader{s: s, src: r, buf: getReadBuf(0)}, nil
}

// readBufs pool the reader's buffers by size class: class 0 holds
// minBuf+Overhead+1 bytes and each next class twice as many, up to
// readSize. A reader opening one small object after another (an export, a
// pack run) then reuses buffers instead of making one for each.
var readBufs [readClasses]sync.Pool

// readClasses is the number of size classes between the first buffer and
// readSize.
const readClasses = 5

func readClassSize(c int) int { return min((minBuf+Overhead+1)<<c, readSize) }

func getReadBuf(c int) []byte {
	if b, ok := readBufs[c].Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, readClassSize(c))
}

// putReadBuf keeps b for the next reader; a buffer of no class is left to
// the garbage collector.
func putReadBuf(b []byte) {
	for c := range readClasses {
		if len(b) == readClassSize(c) {
			readBufs[c].Put(&b)
			return
		}
	}
}

// release gives the buffer back once nothing of it will be returned: at
// the end of the plaintext or on an error. Errors and io.EOF are sticky, so
// the reader never touches the buffer again.
func (r *reader) release() {
	if r.buf != nil && len(r.plain) == 0 {
		putReadBuf(r.buf)
		r.buf = nil
	}
}

func (r *reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for len(r.plain) == 0 {
		if r.err != nil {
			r.release()
			return 0, r.err
		}
		if r.done {
			r.release()
			return 0, io.EOF
		}
		r.err = r.next()
	}
	n := copy(p, r.plain)
	r.plain = r.plain[n:]
	return n, nil
}

// next reads and opens one chunk. It reads one byte past a full chunk: the
// stream's end, not the chunk's length, tells whether a full chunk is the
// final one.
func (r *reader) next() error {
	n := 0
	if r.carried {
		r.buf[0] = r.carry
		n = 1
	}
	m, err := io.ReadFull(r.src, r.buf[n:])
	n += m
	for err == nil && n < readSize {
		// The buffer filled before the chunk ended: grow it, keep reading.
		nb := getReadBuf(r.grow + 1)
		r.grow++
		copy(nb, r.buf[:n])
		putReadBuf(r.buf)
		r.buf = nb
		m, err = io.ReadFull(r.src, r.buf[n:])
		n += m
	}
	last := false
	switch {
	case err == nil:
		r.carried, r.carry = true, r.buf[ChunkSize+Overhead]
		n = ChunkSize + Overhead
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		last, r.carried = true, false
		if n < Overhead {
			return damaged("truncated in chunk %d", r.s.counter)
		}
	default:
		return fmt.Errorf("seal: read chunk: %w", err)
	}
	if last && n == Overhead && r.s.counter > 0 {
		// Writers end a multiple of ChunkSize with a full final chunk;
		// refusing the other spelling keeps one sealed form per plaintext.
		return damaged("empty final chunk after chunk %d", r.s.counter-1)
	}
	i := r.s.counter
	if !r.s.nextNonce(last) {
		return damaged("more than %d chunks", maxChunks)
	}
	plain, err := r.s.aead.Open(r.buf[:0], r.s.nonce[:], r.buf[:n], r.s.ad[:])
	if err != nil {
		if last {
			return damaged("chunk %d (final) did not verify", i)
		}
		return damaged("chunk %d did not verify", i)
	}
	r.plain = plain
	r.done = last
	return nil
}

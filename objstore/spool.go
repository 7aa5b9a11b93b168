package objstore

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// SpoolDir is where uploads to a bucket of more than memLimit wait under
// a data directory: sealed bytes only (see sealedFile).
func SpoolDir(dataDir string) string { return filepath.Join(dataDir, "spool") }

// RemoveStaleSpool removes spooled uploads older than age: a crash left
// them (they hold sealed bytes only). Younger ones may belong to a CLI
// command running beside the server.
func RemoveStaleSpool(dataDir string, age time.Duration) (int, error) {
	entries, err := os.ReadDir(SpoolDir(dataDir))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || e.IsDir() || time.Since(info.ModTime()) < age {
			continue
		}
		if os.Remove(filepath.Join(SpoolDir(dataDir), e.Name())) == nil {
			n++
		}
	}
	return n, nil
}

// memLimit is the most an upload to a bucket holds in memory: a sealed
// vCon (a few KiB) never touches the disk, and 16 or more uploads at once
// hold a few MiB at most. Larger uploads (pack files, exports) spill to a
// sealed spool file.
const memLimit = 1 << 20

// memPool keeps upload buffers between uploads, so a store allocates none.
var memPool = sync.Pool{New: func() any {
	b := make([]byte, 0, 16<<10)
	return &b
}}

// uploadBody holds an upload's bytes until its PUT, which may send them
// more than once (retries rewind it): in a pooled buffer up to memLimit,
// then in a spool file.
type uploadBody struct {
	dir   string
	mem   *[]byte
	spool *sealedFile
}

func newUploadBody(dir string) *uploadBody {
	return &uploadBody{dir: dir, mem: memPool.Get().(*[]byte)}
}

func (b *uploadBody) Write(p []byte) (int, error) {
	if b.spool == nil {
		if len(*b.mem)+len(p) <= memLimit {
			*b.mem = append(*b.mem, p...)
			return len(p), nil
		}
		s, err := newSealedFile(b.dir)
		if err != nil {
			return 0, err
		}
		b.spool = s
		if _, err := s.Write(*b.mem); err != nil {
			return 0, err
		}
		b.putMem()
	}
	return b.spool.Write(p)
}

// reader returns the bytes written so far, from their start. Each call
// gives a new reader; none is valid after release.
func (b *uploadBody) reader() io.ReadSeeker {
	if b.spool != nil {
		return &sealedReader{s: b.spool}
	}
	return bytes.NewReader(*b.mem)
}

// release frees the buffer or the spool file.
func (b *uploadBody) release() {
	b.putMem()
	if b.spool != nil {
		b.spool.f.Close()
		b.spool = nil
	}
}

func (b *uploadBody) putMem() {
	if b.mem == nil {
		return
	}
	// An export's buffer holds clear columns: they do not outlive the
	// upload in a pooled buffer either.
	clear(*b.mem)
	*b.mem = (*b.mem)[:0]
	if cap(*b.mem) <= 2*memLimit {
		memPool.Put(b.mem)
	}
	b.mem = nil
}

// sealedFile is a spool file that holds no clear byte: an export's
// uploads are clear Parquet (docs/export.md), and no clear byte may reach
// the disk. Its bytes are encrypted with AES-256-CTR under a key made for
// this one file that lives only in this value's cipher: once the process
// ends, the file (unlinked at once, so a kill leaves nothing to find
// either) cannot be read by anyone. CTR can start anywhere, so a retry
// rewinds the reader for free.
//
// It has no authentication tag, as nothing but this process can reach the
// file (it has no name), and the bytes read back are checked anyway: the
// PUT signs the SHA-256 of the clear bytes computed as they were written,
// and the bucket refuses a body that does not match it.
type sealedFile struct {
	f     *os.File
	block cipher.Block
	iv    [aes.BlockSize]byte
	w     cipher.Stream // the write stream, at offset size
	size  int64
	buf   []byte
}

func newSealedFile(dir string) (*sealedFile, error) {
	var key [32]byte
	s := &sealedFile{}
	if _, err := rand.Read(key[:]); err != nil {
		return nil, fmt.Errorf("objstore: spool key: %w", err)
	}
	if _, err := rand.Read(s.iv[:]); err != nil {
		return nil, fmt.Errorf("objstore: spool key: %w", err)
	}
	block, err := aes.NewCipher(key[:])
	clear(key[:])
	if err != nil {
		return nil, fmt.Errorf("objstore: spool key: %w", err)
	}
	// The spool file is unlinked at once and used through its descriptor
	// only: a kill leaves nothing behind.
	f, err := os.CreateTemp(dir, ".s3-upload-*")
	if err != nil {
		return nil, fmt.Errorf("objstore: spool file: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("objstore: spool file: %w", err)
	}
	s.f, s.block = f, block
	s.w = cipher.NewCTR(block, s.iv[:])
	s.buf = make([]byte, 64<<10)
	return s, nil
}

func (s *sealedFile) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := min(len(p), len(s.buf))
		s.w.XORKeyStream(s.buf[:c], p[:c])
		m, err := s.f.Write(s.buf[:c])
		n += m
		s.size += int64(m)
		if err != nil {
			return n, fmt.Errorf("objstore: spool file: %w", err)
		}
		p = p[c:]
	}
	return n, nil
}

// streamAt returns the key stream from offset off: the counter block of
// off, the bytes of off within it skipped.
func (s *sealedFile) streamAt(off int64) cipher.Stream {
	iv := s.iv
	// The counter is the IV as a 128-bit big-endian number plus the
	// block index, as the write stream counts.
	add := uint64(off / aes.BlockSize)
	for i := len(iv) - 1; i >= 0 && add > 0; i-- {
		sum := uint64(iv[i]) + add&0xff
		iv[i] = byte(sum)
		add = add>>8 + sum>>8
	}
	st := cipher.NewCTR(s.block, iv[:])
	if skip := off % aes.BlockSize; skip > 0 {
		var junk [aes.BlockSize]byte
		st.XORKeyStream(junk[:skip], junk[:skip])
	}
	return st
}

// sealedReader reads a sealedFile's clear bytes from its own offset.
type sealedReader struct {
	s      *sealedFile
	off    int64
	st     cipher.Stream
	stream int64 // the offset st is at; meaningful when st != nil
}

func (r *sealedReader) Read(p []byte) (int, error) {
	if r.off >= r.s.size {
		return 0, io.EOF
	}
	if rest := r.s.size - r.off; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := r.s.f.ReadAt(p, r.off)
	if r.st == nil || r.stream != r.off {
		r.st = r.s.streamAt(r.off)
	}
	r.st.XORKeyStream(p[:n], p[:n])
	r.off += int64(n)
	r.stream = r.off
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (r *sealedReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += r.s.size
	default:
		return 0, errors.New("objstore: spool file: bad whence")
	}
	if offset < 0 {
		return 0, errors.New("objstore: spool file: negative offset")
	}
	r.off = offset
	return offset, nil
}

// Spool holds bytes to be read again, as an upload's body does: in
// memory up to 1 MiB, past that in a sealed, unlinked file under dir
// (made when first needed). A signed vCon's payload waits in one while
// its signatures are checked (docs/signatures.md). A write never fails,
// so that the reader feeding it reads on; Reader reports the first error.
type Spool struct {
	dir string
	b   *uploadBody
	err error
}

// NewSpool starts an empty spool whose file, if it needs one, is in dir.
func NewSpool(dir string) *Spool { return &Spool{dir: dir, b: newUploadBody(dir)} }

func (s *Spool) Write(p []byte) (int, error) {
	if s.err == nil && s.b.spool == nil && len(*s.b.mem)+len(p) > memLimit {
		s.err = os.MkdirAll(s.dir, 0o700)
	}
	if s.err == nil {
		_, s.err = s.b.Write(p)
	}
	return len(p), nil
}

// Reader reads what was written, from the start; each call a new reader.
func (s *Spool) Reader() (io.Reader, error) {
	if s.err != nil {
		return nil, s.err
	}
	return s.b.reader(), nil
}

// Release frees the buffer, or closes the file (which has no name).
func (s *Spool) Release() { s.b.release() }

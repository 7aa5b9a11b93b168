package replica

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/seal"
)

// Every replica object is one generation's (docs/FORMAT.md, "Replica
// objects"):
//
//	replica/g<gen>/manifest                  the generation's table of contents, written last
//	replica/g<gen>/shard-<id>                rows of one key range of one table
//	replica/g<gen>/seg-<first>-<last>        the rows changed by the log's entries first..last
//	replica/head                             the newest object of the chain, rewritten by every cut
//
// Generations and sequence numbers are zero-padded decimals, so listing
// order is number order. Nothing in a name says more than these numbers.
const root = "replica/"

// headKey names the one replica object that is not create-only: each cut
// and each rollover rewrites it to name the newest object, so that a
// restore can tell a replica that lost its newest segments
// (docs/FORMAT.md, "Replica objects").
const headKey = root + "head"

func genPrefix(gen int64) string { return fmt.Sprintf("%sg%010d/", root, gen) }

func manifestKey(gen int64) string { return genPrefix(gen) + "manifest" }

func segmentKey(gen, first, last int64) string {
	return fmt.Sprintf("%sseg-%020d-%020d", genPrefix(gen), first, last)
}

func shardKey(gen int64, id ids.ID) string {
	return fmt.Sprintf("%sshard-%x", genPrefix(gen), id[:])
}

// parseKey reads a replica key back: its generation and, for a segment,
// its range. kind is "manifest", "shard" or "seg"; ok is false for a name
// the replica never writes.
func parseKey(key string) (gen int64, kind string, first, last int64, ok bool) {
	rest, found := strings.CutPrefix(key, root+"g")
	if !found {
		return
	}
	g, name, found := strings.Cut(rest, "/")
	if !found || len(g) != 10 {
		return
	}
	gen, err := strconv.ParseInt(g, 10, 64)
	if err != nil {
		return
	}
	switch {
	case name == "manifest":
		return gen, "manifest", 0, 0, true
	case strings.HasPrefix(name, "shard-") && len(name) == len("shard-")+32:
		return gen, "shard", 0, 0, true
	case strings.HasPrefix(name, "seg-") && len(name) == len("seg-")+41:
		f, err1 := strconv.ParseInt(name[4:24], 10, 64)
		l, err2 := strconv.ParseInt(name[25:], 10, 64)
		if err1 == nil && err2 == nil && name[24] == '-' {
			return gen, "seg", f, l, true
		}
	}
	return 0, "", 0, 0, false
}

// An object's bytes: a format line, the catalog's id and the object's own
// (16 bytes each: the catalog's is random, the object's a hash of its
// name), its data key wrapped under the master key for (catalog id,
// object id), then the body sealed with that key as every vCon is. Nothing
// in it reads without the master key; an object moved under another name,
// or into another catalog's replica, fails to open.
var magic = []byte("vcon-server replica 1\n")

type sealer struct {
	key     *seal.MasterKey
	catalog ids.ID
}

// written is what put stored: its size and the SHA-256 of its bytes, by
// which the next object of the chain names it.
type written struct {
	n   int64
	sum []byte
}

// put seals what write writes and stores it under key, create-only but
// for the head.
func (s *sealer) put(ctx context.Context, store objstore.Store, key string, write func(io.Writer) error) (written, error) {
	u, err := store.Upload(ctx, key, key != headKey)
	if err != nil {
		return written{}, err
	}
	defer u.Abort()
	w, err := s.frame(u, key, write)
	if err != nil {
		return written{}, err
	}
	if err := u.Commit(); err != nil {
		return written{}, err
	}
	return w, nil
}

// frame writes the object under key to out: its format line, ids and
// wrapped data key, then what write writes, sealed.
func (s *sealer) frame(out io.Writer, key string, write func(io.Writer) error) (written, error) {
	id := objectID(key)
	dk, err := seal.NewDataKey()
	if err != nil {
		return written{}, err
	}
	wrapped, err := s.key.Wrap(dk, s.catalog, id)
	if err != nil {
		return written{}, err
	}
	h := sha256.New()
	cw := &countingWriter{w: io.MultiWriter(out, h)}
	cw.Write(magic)
	cw.Write(s.catalog[:])
	cw.Write(id[:])
	cw.Write(wrapped)
	sw, err := seal.NewWriter(cw, dk, s.catalog, id)
	if err != nil {
		return written{}, err
	}
	if err := write(sw); err != nil {
		return written{}, err
	}
	if err := sw.Close(); err != nil {
		return written{}, err
	}
	if cw.err != nil {
		return written{}, cw.err
	}
	return written{n: cw.n, sum: h.Sum(nil)}, nil
}

// get opens the object under key and returns its body, verified as it is
// read; the caller closes it. A sealer with a zero catalog id (a restore,
// before its manifest is read) takes the object's. With sum non-nil, the
// stored bytes also go through it as they are read: once the body is
// read to its end (drained; the sealed reader ends only where the stored
// bytes do), it holds the object's SHA-256.
func (s *sealer) get(ctx context.Context, store objstore.Store, key string, sum hash.Hash) (io.ReadCloser, error) {
	raw, err := store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return s.open(key, raw, sum)
}

// open is get of an object whose stored bytes raw reads.
func (s *sealer) open(key string, raw io.ReadCloser, sum hash.Hash) (io.ReadCloser, error) {
	var rc io.ReadCloser = raw
	if sum != nil {
		rc = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(raw, sum), raw}
	}
	head := make([]byte, len(magic)+32+seal.WrappedSize)
	if _, err := io.ReadFull(rc, head); err != nil || !bytes.Equal(head[:len(magic)], magic) {
		rc.Close()
		return nil, fmt.Errorf("replica: %s is not a replica object", key)
	}
	var cat, id ids.ID
	copy(cat[:], head[len(magic):])
	copy(id[:], head[len(magic)+16:])
	if s.catalog == (ids.ID{}) {
		s.catalog = cat
	}
	if cat != s.catalog {
		rc.Close()
		return nil, fmt.Errorf("replica: %s belongs to another catalog's replica", key)
	}
	if id != objectID(key) {
		rc.Close()
		return nil, fmt.Errorf("replica: %s holds an object written under another name", key)
	}
	dk, err := s.key.Unwrap(head[len(magic)+32:], s.catalog, id)
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("replica: %s does not open with this master key and catalog: %w", key, err)
	}
	r, err := seal.NewReader(rc, dk, s.catalog, id)
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("replica: %s: %w", key, err)
	}
	return struct {
		io.Reader
		io.Closer
	}{r, rc}, nil
}

// hashOf reads the object under key whole and returns its SHA-256: a
// segment a cut-off process wrote under the name the next cut takes.
func (s *sealer) hashOf(ctx context.Context, store objstore.Store, key string) ([]byte, error) {
	h := sha256.New()
	rc, err := s.get(ctx, store, key, h)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if err := drained(rc, key); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// objectID binds an object to its name.
func objectID(key string) ids.ID {
	h := sha256.Sum256([]byte("vcon-server replica object\x00" + key))
	var id ids.ID
	copy(id[:], h[:])
	return id
}

// objectCatalog reads which catalog's replica the object under key is.
func objectCatalog(ctx context.Context, store objstore.Store, key string) (ids.ID, error) {
	var id ids.ID
	rc, err := store.GetRange(ctx, key, 0, int64(len(magic))+16)
	if err != nil {
		return id, fmt.Errorf("replica: read %s: %w", key, err)
	}
	defer rc.Close()
	head := make([]byte, len(magic)+16)
	if _, err := io.ReadFull(rc, head); err != nil || !bytes.Equal(head[:len(magic)], magic) {
		return id, fmt.Errorf("replica: %s is not a replica object", key)
	}
	copy(id[:], head[len(magic):])
	return id, nil
}

type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

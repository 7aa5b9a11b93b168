// Package replicaread opens replica objects as docs/FORMAT.md ("Replica
// objects") describes them, without the replica package: the tests that
// look for a destroyed key in every object read the format from outside.
package replicaread

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/seal"
)

// magic starts every replica object: then the catalog's id and the
// object's, its data key wrapped under the master key, and the body
// sealed with that key.
const magic = "vcon-server replica 1\n"

// headKey is the one object made of slots: 4,096 bytes each, a 2-byte
// big-endian length, then an object (a head written before the slots
// is one object on its own).
const (
	headKey  = "replica/head"
	slotSize = 4096
)

// Body reads the object under key from s and returns its body, opened
// with mk; of the head, every slot's body, one after the other. An
// object that does not open fails the test.
func Body(t testing.TB, s objstore.Store, mk *seal.MasterKey, key string) []byte {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer rc.Close()
	raw, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if key != headKey || bytes.HasPrefix(raw, []byte(magic)) {
		return open(t, mk, key, raw)
	}
	var bodies []byte
	for off := 0; off < len(raw); off += slotSize {
		slot := raw[off:min(off+slotSize, len(raw))]
		n := int(binary.BigEndian.Uint16(slot))
		if n == 0 {
			continue
		}
		if 2+n > len(slot) {
			t.Fatalf("%s: slot %d says %d bytes and holds %d", key, off/slotSize+1, n, len(slot)-2)
		}
		bodies = append(bodies, open(t, mk, key, slot[2:2+n])...)
	}
	return bodies
}

// open opens one replica object's stored bytes.
func open(t testing.TB, mk *seal.MasterKey, key string, b []byte) []byte {
	t.Helper()
	if len(b) < len(magic)+32+seal.WrappedSize || string(b[:len(magic)]) != magic {
		t.Fatalf("%s is not a replica object", key)
	}
	var cat, id ids.ID
	copy(cat[:], b[len(magic):])
	copy(id[:], b[len(magic)+16:])
	at := len(magic) + 32
	dk, err := mk.Unwrap(b[at:at+seal.WrappedSize], cat, id)
	if err != nil {
		t.Fatalf("%s does not open with the master key: %v", key, err)
	}
	r, err := seal.NewReader(bytes.NewReader(b[at+seal.WrappedSize:]), dk, cat, id)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	body, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return body
}

// Package translog is the RFC 6962 Merkle tree of the audit logs and the
// C2SP formats they are published in (docs/audit-log.md): leaf and node
// hashes, the right edge an append needs, inclusion proofs read from
// stored hashes, signed notes and checkpoints, tile paths.
//
// It is written here rather than taken from golang.org/x/mod/sumdb/tlog
// or github.com/transparency-dev/merkle so that the tests can check the
// server's log with an implementation that did not write it (x/mod's),
// and because what the catalog needs is small: a leaf's hash and the
// nodes it completes, with the right edge kept beside the tree, in one
// row per record (docs/FORMAT.md, "Audit log tree").
package translog

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
)

// HashSize is the size of every hash of the tree (SHA-256).
const HashSize = sha256.Size

// Hash is a node of the tree.
type Hash [HashSize]byte

func (h Hash) String() string { return base64.StdEncoding.EncodeToString(h[:]) }

// LeafHash is the hash of a leaf: SHA-256(0x00 ‖ data) (RFC 6962, 2.1).
func LeafHash(data []byte) Hash {
	b := make([]byte, 0, 1+len(data))
	b = append(append(b, 0), data...)
	return sha256.Sum256(b)
}

// NodeHash is the hash of an interior node: SHA-256(0x01 ‖ left ‖ right).
func NodeHash(left, right Hash) Hash {
	var b [1 + 2*HashSize]byte
	b[0] = 1
	copy(b[1:], left[:])
	copy(b[1+HashSize:], right[:])
	return sha256.Sum256(b[:])
}

// EmptyRoot is the root of the tree of no leaves: SHA-256 of nothing.
var EmptyRoot = Hash(sha256.Sum256(nil))

// An Edge is the right edge of a tree: the roots of its complete subtrees,
// left to right, one for each bit set in its size, the largest first. It
// is all an append needs.
type Edge []Hash

// Append adds the leaf at index size (the tree's size before it) and
// appends to dst the hashes the leaf completes: its own, then the node at
// each level above it whose right child it ends, the stored hashes of
// that record (docs/FORMAT.md, "Audit log tree"), as bytes, as the
// catalog keeps them: one slice an append, none per hash.
func (e *Edge) Append(dst []byte, size uint64, leaf Hash) []byte {
	dst = append(dst, leaf[:]...)
	h := leaf
	for l := 0; size>>l&1 == 1; l++ {
		h = NodeHash((*e)[len(*e)-1], h)
		*e = (*e)[:len(*e)-1]
		dst = append(dst, h[:]...)
	}
	*e = append(*e, h)
	return dst
}

// Root is the root hash of the tree whose right edge e is.
func (e Edge) Root() Hash {
	if len(e) == 0 {
		return EmptyRoot
	}
	r := e[len(e)-1]
	for i := len(e) - 2; i >= 0; i-- {
		r = NodeHash(e[i], r)
	}
	return r
}

// Bytes is e as the catalog stores it: the hashes one after another.
func (e Edge) Bytes() []byte {
	b := make([]byte, 0, len(e)*HashSize)
	for _, h := range e {
		b = append(b, h[:]...)
	}
	return b
}

// ParseEdge reads what Bytes wrote, for a tree of size leaves.
func ParseEdge(b []byte, size uint64) (Edge, error) {
	n := 0
	for s := size; s > 0; s &= s - 1 {
		n++
	}
	if len(b) != n*HashSize {
		return nil, fmt.Errorf("translog: a right edge of %d bytes for a tree of %d leaves, which has %d complete subtrees", len(b), size, n)
	}
	e := make(Edge, n)
	for i := range e {
		copy(e[i][:], b[i*HashSize:])
	}
	return e, nil
}

// StoredAt is where the node at level (0: the leaves) and index is kept:
// with the record whose leaf completes it, at place level of that record's
// stored hashes.
func StoredAt(level int, index uint64) (record uint64) {
	return (index+1)<<level - 1
}

// A NodeReader reads stored nodes: the hash at level and index of a tree
// that holds it complete.
type NodeReader interface {
	Node(level int, index uint64) (Hash, error)
}

// ErrRange: an index or size outside the tree.
var ErrRange = errors.New("translog: outside the tree")

// subtree is the Merkle Tree Hash of the leaves [lo, hi), lo < hi, split
// as RFC 6962 splits it: the left part is always a complete subtree, a
// stored node.
func subtree(r NodeReader, lo, hi uint64) (Hash, error) {
	n := hi - lo
	if n&(n-1) == 0 && lo%n == 0 {
		l := 0
		for 1<<l < n {
			l++
		}
		return r.Node(l, lo>>l)
	}
	k := split(n)
	left, err := subtree(r, lo, lo+k)
	if err != nil {
		return Hash{}, err
	}
	right, err := subtree(r, lo+k, hi)
	if err != nil {
		return Hash{}, err
	}
	return NodeHash(left, right), nil
}

// split is the largest power of two smaller than n (n > 1).
func split(n uint64) uint64 {
	k := uint64(1)
	for k<<1 < n {
		k <<= 1
	}
	return k
}

// TreeHash is the root of the first size leaves, from stored nodes.
func TreeHash(r NodeReader, size uint64) (Hash, error) {
	if size == 0 {
		return EmptyRoot, nil
	}
	return subtree(r, 0, size)
}

// InclusionProof is the audit path of leaf index in the tree of size
// leaves (RFC 6962, 2.1.1): the leaf's sibling first, the root's child
// last.
func InclusionProof(r NodeReader, index, size uint64) ([]Hash, error) {
	if index >= size {
		return nil, ErrRange
	}
	var path []Hash
	lo, hi := uint64(0), size
	var outer []Hash // collected root side first
	for hi-lo > 1 {
		k := split(hi - lo)
		var h Hash
		var err error
		if index < lo+k {
			h, err = subtree(r, lo+k, hi)
			hi = lo + k
		} else {
			h, err = subtree(r, lo, lo+k)
			lo += k
		}
		if err != nil {
			return nil, err
		}
		outer = append(outer, h)
	}
	for i := len(outer) - 1; i >= 0; i-- {
		path = append(path, outer[i])
	}
	return path, nil
}

// RootFromInclusion is the root the audit path of leaf at index gives for
// a tree of size leaves (RFC 9162, 2.1.3.2); a path of the wrong length
// is an error.
func RootFromInclusion(leaf Hash, index, size uint64, path []Hash) (Hash, error) {
	if index >= size {
		return Hash{}, ErrRange
	}
	fn, sn, r := index, size-1, leaf
	for _, p := range path {
		if sn == 0 {
			return Hash{}, errors.New("translog: the inclusion proof is longer than the tree is deep")
		}
		if fn&1 == 1 || fn == sn {
			r = NodeHash(p, r)
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			r = NodeHash(r, p)
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 {
		return Hash{}, errors.New("translog: the inclusion proof is shorter than the tree is deep")
	}
	return r, nil
}

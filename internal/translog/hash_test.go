package translog

import (
	"crypto/ed25519"
	"fmt"
	"testing"
)

// mth is RFC 6962's Merkle Tree Hash, written as the RFC writes it.
func mth(leaves []Hash) Hash {
	switch len(leaves) {
	case 0:
		return EmptyRoot
	case 1:
		return leaves[0]
	}
	k := split(uint64(len(leaves)))
	return NodeHash(mth(leaves[:k]), mth(leaves[k:]))
}

// nodes keeps every stored hash as the catalog does, by record.
type nodes map[uint64][]Hash

func (n nodes) Node(level int, index uint64) (Hash, error) {
	s, ok := n[StoredAt(level, index)]
	if !ok || level >= len(s) {
		return Hash{}, fmt.Errorf("no node %d/%d", level, index)
	}
	return s[level], nil
}

func TestTree(t *testing.T) {
	var e Edge
	var leaves []Hash
	st := nodes{}
	for i := uint64(0); i < 300; i++ {
		leaf := LeafHash([]byte(fmt.Sprint(i)))
		leaves = append(leaves, leaf)
		for b := e.Append(nil, i, leaf); len(b) > 0; b = b[HashSize:] {
			st[i] = append(st[i], Hash(b))
		}
		size := i + 1
		want := mth(leaves)
		if e.Root() != want {
			t.Fatalf("size %d: edge root differs from RFC 6962's", size)
		}
		if got, err := TreeHash(st, size); err != nil || got != want {
			t.Fatalf("size %d: stored root %v, %v", size, got, err)
		}
		for j := uint64(0); j < size; j += 7 {
			path, err := InclusionProof(st, j, size)
			if err != nil {
				t.Fatal(err)
			}
			if r, err := RootFromInclusion(leaves[j], j, size, path); err != nil || r != want {
				t.Fatalf("size %d leaf %d: proof gives %v, %v", size, j, r, err)
			}
		}
		if b, err := ParseEdge(e.Bytes(), size); err != nil || b.Root() != want {
			t.Fatalf("edge round trip: %v", err)
		}
	}
}

func TestNote(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(nil)
	c := Checkpoint{Origin: "example.com/log", Size: 3, Root: LeafHash(nil)}
	n, err := Sign(c, key)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Open(n, c.Origin, pub); err != nil || got != c {
		t.Fatalf("open: %v %v", got, err)
	}
	n[0] = 'E'
	if _, err := Open(n, "Example.com/log", pub); err == nil {
		t.Fatal("a changed note verified")
	}
}

func TestTilePaths(t *testing.T) {
	for _, p := range []string{"0/000", "1/x001/x234/067", "entries/005.p/7", "63/x123/456.p/255"} {
		tl, err := ParseTile(p)
		if err != nil || tl.Path() != p {
			t.Errorf("%s: %v %q", p, err, tl.Path())
		}
	}
	for _, p := range []string{"00/000", "0/1", "0/x000/001", "0/001.p/256", "0/001.p/0", "64/000", "0/001/002", "x/000"} {
		if _, err := ParseTile(p); err == nil {
			t.Errorf("%s: parsed", p)
		}
	}
	if !(Tile{Width: 112, N: 273}).Fits(70000) || (Tile{Width: 111, N: 273}).Fits(70000) || !(Tile{Level: 2, Width: 1}).Fits(70000) {
		t.Error("Fits")
	}
}

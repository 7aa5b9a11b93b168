package export

import (
	"math/bits"
	"sync"
)

// Sealed bytes wait in memory between their fetch and their row, and most
// versions are small: the buffers are pooled by power-of-two size, so that
// an export of many small versions reuses the same few megabytes instead of
// making garbage as fast as it reads (docs/export.md, "How fast").
const (
	minPooled = 4 << 10 // the smallest class
	maxPooled = 1 << 20 // larger buffers are made for their version alone
	classes   = 9       // 4 KiB, 8 KiB, ... 1 MiB
)

var sealedBufs [classes]sync.Pool

// class is the size class that holds n bytes, or -1 for none.
func class(n int64) int {
	if n > maxPooled {
		return -1
	}
	if n <= minPooled {
		return 0
	}
	return bits.Len64(uint64(n-1)) - bits.Len64(minPooled-1)
}

// getSealed returns a buffer of n bytes, pooled when n is small enough.
func getSealed(n int64) []byte {
	c := class(n)
	if c < 0 {
		return make([]byte, n)
	}
	if p, ok := sealedBufs[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, minPooled<<c)
}

// putSealed gives back a buffer from getSealed once nothing refers to it.
func putSealed(b []byte) {
	c := class(int64(cap(b)))
	if c < 0 || cap(b) != minPooled<<c {
		return
	}
	b = b[:0]
	sealedBufs[c].Put(&b)
}

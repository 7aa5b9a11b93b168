package jws

import (
	"crypto/sha256"
	"crypto/x509"
	"sync"
	"time"
)

// Chains remembers chains verified to a set of anchors, so that a
// producer that signs every vCon with one certificate pays for its
// chain's verification once: an entry holds for the same x5c verified to
// the same anchors (Check.AnchorsKey), and only within the validity of
// every certificate of the chain. The zero value is ready to use.
type Chains struct {
	mu sync.Mutex
	m  map[chainKey]chainEntry
}

// maxChains bounds the entries; past it the memory starts again empty.
const maxChains = 4096

type chainKey struct {
	anchors string
	x5c     [sha256.Size]byte
}

type chainEntry struct {
	leaf, anchor        *x509.Certificate
	notBefore, notAfter time.Time // where the whole chain is valid
}

func keyOf(anchors string, x5c []string) chainKey {
	h := sha256.New()
	for _, c := range x5c {
		h.Write([]byte(c))
		h.Write([]byte{0})
	}
	k := chainKey{anchors: anchors}
	h.Sum(k.x5c[:0])
	return k
}

func (c *Chains) get(k chainKey, now time.Time) (chainEntry, bool) {
	if c == nil {
		return chainEntry{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	return e, ok && !now.Before(e.notBefore) && !now.After(e.notAfter)
}

func (c *Chains) put(k chainKey, chain []*x509.Certificate) {
	if c == nil {
		return
	}
	e := chainEntry{leaf: chain[0], anchor: chain[len(chain)-1], notBefore: chain[0].NotBefore, notAfter: chain[0].NotAfter}
	for _, x := range chain[1:] {
		if x.NotBefore.After(e.notBefore) {
			e.notBefore = x.NotBefore
		}
		if x.NotAfter.Before(e.notAfter) {
			e.notAfter = x.NotAfter
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxChains {
		c.m = make(map[chainKey]chainEntry)
	}
	c.m[k] = e
}

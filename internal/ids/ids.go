// Package ids holds the 16-byte identifiers of tenants, vCons and versions.
//
// Version ids are UUIDv7 (RFC 9562): their first 48 bits are the Unix time
// in milliseconds, so ids sort in the order they were made (listings are
// in time order: docs/FORMAT.md, "Identifiers").
package ids

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// ID is a UUID in its 16 raw bytes.
type ID [16]byte

// ErrSyntax is returned by Parse for text that is not a UUID.
var ErrSyntax = errors.New("not a UUID (36 characters: 8-4-4-4-12 hexadecimal digits)")

// Parse reads the canonical 36-character form, in either case.
func Parse(s string) (ID, error) {
	var id ID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, ErrSyntax
	}
	// The 16 bytes start at these offsets; every other character is a
	// dash checked above, so a dash can never stand for a digit.
	for j, i := range [16]int{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34} {
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return ID{}, ErrSyntax
		}
		id[j] = hi<<4 | lo
	}
	return id, nil
}

// ParseHex reads the 32-hex-digit form used in manifests.
func ParseHex(s string) (ID, error) {
	var id ID
	if len(s) != 32 {
		return id, ErrSyntax
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return ID{}, ErrSyntax
	}
	return id, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// String is the canonical lowercase 36-character form.
func (id ID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return string(b[:])
}

// Hex is the 32 lowercase hex digits without dashes.
func (id ID) Hex() string { return hex.EncodeToString(id[:]) }

// IsZero reports whether id is all zero bytes.
func (id ID) IsZero() bool { return id == ID{} }

// NewRandom makes a version 4 UUID.
func NewRandom() ID {
	var id ID
	if _, err := rand.Read(id[:]); err != nil {
		panic("ids: crypto/rand failed: " + err.Error())
	}
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}

var v7 struct {
	sync.Mutex
	lastMS  uint64
	lastSeq uint16
}

// NewV7 makes a UUIDv7 for time t. Ids made in one process at the same
// millisecond keep their order through a 12-bit counter in rand_a.
func NewV7(t time.Time) ID {
	id := NewRandom()
	ms := uint64(t.UnixMilli())
	v7.Lock()
	if ms <= v7.lastMS {
		ms = v7.lastMS
		v7.lastSeq++
		if v7.lastSeq > 0x0fff {
			ms++
			v7.lastSeq = 0
		}
	} else {
		v7.lastSeq = 0
	}
	v7.lastMS = ms
	seq := v7.lastSeq
	v7.Unlock()
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], ms)
	copy(id[0:6], ts[2:8])
	id[6] = 0x70 | byte(seq>>8)
	id[7] = byte(seq)
	return id
}

// Time is the creation time a UUIDv7 carries, to the millisecond.
func Time(id ID) time.Time {
	var ts [8]byte
	copy(ts[2:], id[0:6])
	return time.UnixMilli(int64(binary.BigEndian.Uint64(ts[:])))
}

// MustParse is Parse for text known to be a UUID; it panics otherwise.
func MustParse(s string) ID {
	id, err := Parse(s)
	if err != nil {
		panic("ids: " + s + ": " + err.Error())
	}
	return id
}

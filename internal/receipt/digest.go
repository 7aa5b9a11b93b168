package receipt

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// MaxListed is the most entries (erased and held together) a receipt
// lists; past it the receipt carries their Digest instead, and the answer
// pages them (docs/erasure.md, "Large erasures").
const MaxListed = 100

// Digest stands for an erasure's lists in its receipt: the SHA-256 of
// their text (ListsText) and how many entries and versions they hold.
type Digest struct {
	SHA256   string `json:"sha256"`   // lowercase hex
	Erased   int    `json:"erased"`   // entries of erased
	Versions int    `json:"versions"` // the versions they purged
	Held     int    `json:"held"`     // entries of held
}

// ListsText is what Digest hashes, one line per entry, each ended by a
// newline: every erased entry in uuid order as "erased UUID VERSIONS
// WHOLE" (WHOLE true or false), then every held uuid in uuid order as
// "held UUID". jq -r writes the same lines from the answer's pages
// (docs/erasure.md).
func ListsText(erased []Item, held []string) []byte {
	var b []byte
	for _, it := range erased {
		b = append(b, "erased "+it.UUID+" "+strconv.Itoa(it.Versions)+" "+strconv.FormatBool(it.Whole)+"\n"...)
	}
	for _, u := range held {
		b = append(b, "held "+u+"\n"...)
	}
	return b
}

// ListsDigest is the Digest of the lists.
func ListsDigest(erased []Item, held []string) Digest {
	sum := sha256.Sum256(ListsText(erased, held))
	d := Digest{SHA256: hex.EncodeToString(sum[:]), Erased: len(erased), Held: len(held)}
	for _, it := range erased {
		d.Versions += it.Versions
	}
	return d
}

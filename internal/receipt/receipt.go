// Package receipt signs and checks the receipt of an erasure
// (docs/erasure.md): a JWS in compact serialization (RFC 7515), alg
// EdDSA with an Ed25519 key (RFC 8037), whose header names the key by kid,
// the key's JWK thumbprint (RFC 7638). Anyone holding the public keys,
// served as a JWK set, checks a receipt with any JOSE library, or with
// openssl; nothing of this server is needed.
package receipt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Payload is what a receipt says: the erasure, its tenant, when it was
// asked and done, the kind of its filter (tel, mailto, name or uuids:
// never the value), what it erased or found held (or, past MaxListed
// entries, the digest of those lists), and how many uuids it named that
// the tenant held nothing of.
type Payload struct {
	Erasure      string   `json:"erasure"`
	Tenant       string   `json:"tenant"`
	RequestedAt  string   `json:"requested_at"`
	DoneAt       string   `json:"done_at"`
	Filter       string   `json:"filter"`
	Erased       []Item   `json:"erased,omitzero"` // nil when Digest stands for the lists
	Held         []string `json:"held,omitzero"`
	Digest       *Digest  `json:"digest,omitempty"`
	NotFound     int      `json:"not_found"`
	Unsearchable int      `json:"unsearchable"`
	// Reason is why the server erased on its own (lawful_basis_expired);
	// absent from the receipt of an erasure a request asked for.
	Reason string `json:"reason,omitempty"`
}

// Item is one vCon an erasure took: versions erased, and whether nothing
// of it is kept (false: a current version that does not name the party
// stays).
type Item struct {
	UUID     string `json:"uuid"`
	Versions int    `json:"versions"`
	Whole    bool   `json:"whole"`
}

// JWK is an Ed25519 public key as RFC 8037 writes it.
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
}

// Set is a JWK set (RFC 7517, section 5), as GET /.well-known/jwks.json
// serves it.
type Set struct {
	Keys []JWK `json:"keys"`
}

// ErrKeySet is wrapped by every refusal of Set.Check.
var ErrKeySet = errors.New("receipt: not a key set of erasure receipts")

// Check refuses a set holding anything but Ed25519 public keys, each named
// by its own thumbprint (RFC 7638). A receipt names its key by kid alone,
// so a kid that does not follow from its key would let a set pass one key
// off under another's name.
func (s Set) Check() error {
	for _, k := range s.Keys {
		pub, err := decode(k.X)
		if k.Kty != "OKP" || k.Crv != "Ed25519" || err != nil || len(pub) != ed25519.PublicKeySize {
			return fmt.Errorf("%w: the key %q is not an Ed25519 public key (kty OKP, crv Ed25519, x 32 bytes of base64url)", ErrKeySet, k.Kid)
		}
		if want := KeyID(pub); k.Kid != want {
			return fmt.Errorf("%w: the kid %q is not the RFC 7638 thumbprint of its key, %s", ErrKeySet, k.Kid, want)
		}
	}
	return nil
}

// ParseSet reads a JWK set and checks it.
func ParseSet(b []byte) (Set, error) {
	var s Set
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%w: %v", ErrKeySet, err)
	}
	return s, s.Check()
}

// b64 writes base64url without padding (RFC 7515, section 2).
var b64 = base64.RawURLEncoding

// strictB64 reads it. Strict refuses bits set past the last byte, so that
// each value has one spelling: without it, the last character of a
// signature could be changed to one of three others that decode to the
// same bytes, and a receipt changed in a byte would still verify.
var strictB64 = base64.RawURLEncoding.Strict()

// decode reads unpadded base64url strictly; Go's decoders skip CR and LF
// even when strict, and a JWS has neither.
func decode(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, errors.New("a line break in base64url")
	}
	return strictB64.DecodeString(s)
}

// KeyID is the key's JWK thumbprint (RFC 7638): SHA-256 of its required
// members in lexicographic order, base64url.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256([]byte(`{"crv":"Ed25519","kty":"OKP","x":"` + b64.EncodeToString(pub) + `"}`))
	return b64.EncodeToString(sum[:])
}

// PublicJWK is pub as a JWK.
func PublicJWK(pub ed25519.PublicKey) JWK {
	return JWK{Kty: "OKP", Crv: "Ed25519", X: b64.EncodeToString(pub), Kid: KeyID(pub), Alg: "EdDSA", Use: "sig"}
}

type header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ,omitempty"`
}

// Type is the receipt's typ header.
const Type = "vcon-erasure-receipt+jws"

// Sign makes the compact JWS of p under key.
func Sign(key ed25519.PrivateKey, p Payload) (string, error) {
	pub := key.Public().(ed25519.PublicKey)
	h, err := json.Marshal(header{Alg: "EdDSA", Kid: KeyID(pub), Typ: Type})
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	input := b64.EncodeToString(h) + "." + b64.EncodeToString(body)
	return input + "." + b64.EncodeToString(ed25519.Sign(key, []byte(input))), nil
}

// ErrInvalid is wrapped by every refusal of a receipt by Verify or
// VerifyAnswer (ErrKeySet by their refusal of the key set).
var ErrInvalid = errors.New("receipt: not valid")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// Verify checks a compact JWS against the keys of set and returns its
// payload. It refuses a set that does not pass Check (with its error),
// and wraps ErrInvalid in its refusal of anything but alg EdDSA with a kid
// that names a key of the set, a signature of that key, and a payload
// that is a receipt.
func Verify(token string, set Set) (Payload, string, error) {
	p, _, kid, err := verify(token, set)
	return p, kid, err
}

// verify is Verify, also returning the payload's bytes as signed.
func verify(token string, set Set) (Payload, []byte, string, error) {
	var p Payload
	if err := set.Check(); err != nil {
		return p, nil, "", err
	}
	parts := strings.Split(strings.TrimSpace(token), ".")
	if len(parts) != 3 {
		return p, nil, "", invalid("a compact JWS has three parts separated by dots, this has %d", len(parts))
	}
	hb, err := decode(parts[0])
	if err != nil {
		return p, nil, "", invalid("the header is not base64url")
	}
	var h header
	if err := strictJSON(hb, &h); err != nil {
		return p, nil, "", invalid("the header is not a JSON object: %v", err)
	}
	if h.Alg != "EdDSA" {
		return p, nil, "", invalid("alg is %q, not EdDSA", h.Alg)
	}
	var key *JWK
	for i, k := range set.Keys {
		if k.Kid == h.Kid {
			key = &set.Keys[i]
		}
	}
	if h.Kid == "" || key == nil {
		return p, nil, h.Kid, invalid("kid %q names no key of the key set", h.Kid)
	}
	pub, _ := decode(key.X) // Check read it
	sig, err := decode(parts[2])
	if err != nil || len(sig) != ed25519.SignatureSize {
		return p, nil, h.Kid, invalid("the signature is not %d bytes of base64url", ed25519.SignatureSize)
	}
	if !ed25519.Verify(pub, []byte(parts[0]+"."+parts[1]), sig) {
		return p, nil, h.Kid, invalid("the signature does not verify with key %q", h.Kid)
	}
	pb, err := decode(parts[1])
	if err != nil {
		return p, nil, h.Kid, invalid("the payload is not base64url")
	}
	if err := strictJSON(pb, &p); err != nil || p.Erasure == "" {
		return Payload{}, nil, h.Kid, invalid("the payload is not an erasure receipt")
	}
	return p, pb, h.Kid, nil
}

func strictJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

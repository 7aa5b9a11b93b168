package jws

import (
	"crypto/ed25519"
	"crypto/sha512"
	"io"

	"filippo.io/edwards25519"
)

// verifyEd25519 is ed25519.Verify (RFC 8032, section 5.1.7, as Go checks
// it: S canonical, A a point, the encoding of [S]B - [k]A equal to R)
// with the message written by msg into the hash rather than held: k is
// SHA-512(R || A || M), and R and A come before M.
func verifyEd25519(pub ed25519.PublicKey, sig []byte, msg func(io.Writer) error) (bool, error) {
	if len(pub) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize || sig[63]&224 != 0 {
		return false, nil
	}
	A, err := new(edwards25519.Point).SetBytes(pub)
	if err != nil {
		return false, nil
	}
	S, err := edwards25519.NewScalar().SetCanonicalBytes(sig[32:])
	if err != nil {
		return false, nil
	}
	h := sha512.New()
	h.Write(sig[:32])
	h.Write(pub)
	if err := msg(h); err != nil {
		return false, err
	}
	k, err := edwards25519.NewScalar().SetUniformBytes(h.Sum(nil))
	if err != nil {
		return false, err
	}
	minusA := new(edwards25519.Point).Negate(A)
	R := new(edwards25519.Point).VarTimeDoubleScalarBaseMult(k, minusA, S)
	return string(R.Bytes()) == string(sig[:32]), nil
}

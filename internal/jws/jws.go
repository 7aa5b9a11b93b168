// Package jws checks the signatures of a signed vCon (docs/signatures.md):
// JWS (RFC 7515) signatures whose protected header names the algorithm
// (RS256, PS256, ES256 or EdDSA; RFC 7518, RFC 8037) and carries, or whose
// unprotected header carries, the signer's certificate chain in x5c, which
// must lead to one of the tenant's trust anchors. The payload is read as
// a stream, once a signature, from wherever the caller spooled it: no
// check holds it whole.
package jws

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"time"
)

// Bounds of one signature (docs/signatures.md).
const (
	MaxChain   = 10
	minRSABits = 2048
	maxRSABits = 8192
)

// Signer is who made a signature that verified: the leaf certificate's
// SHA-256 fingerprint (lowercase hex of its DER), subject, issuer and
// expiry, and the algorithm.
type Signer struct {
	Fingerprint string    `json:"fingerprint"`
	Subject     string    `json:"subject"`
	Issuer      string    `json:"issuer"`
	NotAfter    time.Time `json:"not_after"`
	Alg         string    `json:"alg"`
	// Anchor is the fingerprint of the trust anchor its chain led to:
	// check --signatures finds a signer whose anchor the tenant dropped.
	Anchor string `json:"anchor"`
}

// Signature is one signature as sent: the protected header and the
// signature in base64url, the unprotected header's JSON (nil if none).
type Signature struct {
	Protected string
	Header    []byte
	Value     string
}

// Check is what a verification is checked against.
type Check struct {
	Anchors *x509.CertPool // the tenant's trust anchors
	Now     time.Time      // the chain must be valid then
	// UUID is the payload's uuid: a header that names one names it.
	UUID string
	// Payload returns a reader of the payload's characters as sent (the
	// JWS Payload's base64url), from the start, each time it is called.
	Payload func() (io.Reader, error)
	// Chains, when set, remembers the chains verified to the anchors
	// AnchorsKey names (a tenant's, as they now are).
	Chains     *Chains
	AnchorsKey string
}

// header is what is read of a JOSE header.
type header struct {
	Alg  string   `json:"alg"`
	X5c  []string `json:"x5c"`
	X5u  string   `json:"x5u"`
	UUID *string  `json:"uuid"`
	Crit []string `json:"crit"`
}

// Verify checks one signature: its algorithm, its chain to an anchor at
// c.Now, a key usage that allows signing, the header's uuid, and the
// signature over the protected header and the payload. The error says
// what failed, in words for a 422.
func Verify(sig Signature, c Check) (Signer, error) {
	var prot, unprot header
	if sig.Protected == "" {
		return Signer{}, errors.New("it has no protected header: alg must be protected")
	}
	if err := decodeHeader(sig.Protected, &prot); err != nil {
		return Signer{}, fmt.Errorf("the protected header %v", err)
	}
	if sig.Header != nil {
		if err := json.Unmarshal(sig.Header, &unprot); err != nil {
			return Signer{}, fmt.Errorf("the unprotected header is not a JOSE header: %v", err)
		}
	}
	alg := prot.Alg
	switch {
	case len(prot.Crit) > 0:
		return Signer{}, fmt.Errorf("the protected header's crit names %q, which this server does not understand", prot.Crit)
	case unprot.Alg != "" && unprot.Alg != alg:
		return Signer{}, fmt.Errorf("the unprotected header's alg %q is not the protected %q", unprot.Alg, alg)
	}
	for _, u := range []*string{prot.UUID, unprot.UUID} {
		if u != nil && *u != c.UUID {
			return Signer{}, fmt.Errorf("the header's uuid %q is not the payload's %q", *u, c.UUID)
		}
	}
	x5c := prot.X5c
	if x5c == nil {
		x5c = unprot.X5c
	}
	if x5c == nil {
		if prot.X5u != "" || unprot.X5u != "" {
			return Signer{}, errors.New("it names its certificate by x5u only, which the server never fetches: put the chain in x5c")
		}
		return Signer{}, errors.New("it carries no certificate chain (x5c)")
	}
	leaf, anchor, err := chain(x5c, c)
	if err != nil {
		return Signer{}, err
	}
	if err := verifySig(alg, leaf.PublicKey, sig, c); err != nil {
		return Signer{}, err
	}
	return Signer{Fingerprint: Fingerprint(leaf), Subject: leaf.Subject.String(), Issuer: leaf.Issuer.String(),
		NotAfter: leaf.NotAfter.UTC(), Alg: alg, Anchor: Fingerprint(anchor)}, nil
}

// Fingerprint is the SHA-256 of a certificate's DER, lowercase hex.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// decodeHeader reads a base64url header, strictly (RFC 7515: no padding).
func decodeHeader(b64 string, h *header) error {
	b, err := base64.RawURLEncoding.Strict().DecodeString(b64)
	if err != nil {
		return errors.New("is not base64url")
	}
	if err := json.Unmarshal(b, h); err != nil {
		return fmt.Errorf("is not a JOSE header: %v", err)
	}
	return nil
}

// chain parses x5c and verifies it to an anchor at c.Now; it returns the
// leaf and the anchor.
func chain(x5c []string, c Check) (leaf, anchor *x509.Certificate, err error) {
	if len(x5c) > MaxChain {
		return nil, nil, fmt.Errorf("its chain holds %d certificates, more than %d", len(x5c), MaxChain)
	}
	key := keyOf(c.AnchorsKey, x5c)
	if e, ok := c.Chains.get(key, c.Now); ok {
		return e.leaf, e.anchor, nil
	}
	certs := make([]*x509.Certificate, len(x5c))
	for i, s := range x5c {
		der, derr := base64.StdEncoding.DecodeString(s)
		if derr != nil {
			return nil, nil, fmt.Errorf("x5c[%d] is not base64", i)
		}
		if certs[i], err = x509.ParseCertificate(der); err != nil {
			return nil, nil, fmt.Errorf("x5c[%d] is not a certificate: %v", i, err)
		}
	}
	leaf = certs[0]
	inter := x509.NewCertPool()
	for _, ic := range certs[1:] {
		inter.AddCert(ic)
	}
	if c.Anchors == nil {
		return nil, nil, errors.New("the tenant has no trust anchor: add one with tenant set-signatures --ca")
	}
	chains, err := leaf.Verify(x509.VerifyOptions{Roots: c.Anchors, Intermediates: inter, CurrentTime: c.Now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		return nil, nil, fmt.Errorf("its certificate does not verify to the tenant's trust anchors: %v", err)
	}
	if ku := leaf.KeyUsage; ku != 0 && ku&(x509.KeyUsageDigitalSignature|x509.KeyUsageContentCommitment) == 0 {
		return nil, nil, errors.New("its certificate's key usage does not allow signing (digitalSignature or nonRepudiation)")
	}
	c.Chains.put(key, chains[0])
	return leaf, chains[0][len(chains[0])-1], nil
}

// verifySig checks the signature value with the leaf's key, for alg.
func verifySig(alg string, key any, sig Signature, c Check) error {
	value, err := base64.RawURLEncoding.Strict().DecodeString(sig.Value)
	if err != nil {
		return errors.New("its signature is not base64url")
	}
	wrongKey := fmt.Errorf("alg %s does not fit its certificate's %T key", alg, key)
	var ok bool
	switch alg {
	case "RS256", "PS256":
		pub, isRSA := key.(*rsa.PublicKey)
		if !isRSA {
			return wrongKey
		}
		if n := pub.N.BitLen(); n < minRSABits || n > maxRSABits {
			return fmt.Errorf("its RSA key has %d bits, outside %d to %d", n, minRSABits, maxRSABits)
		}
		var digest []byte
		if digest, err = signingDigest(sig, c); err != nil {
			return err
		}
		if alg == "RS256" {
			ok = rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest, value) == nil
		} else {
			ok = rsa.VerifyPSS(pub, crypto.SHA256, digest, value, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}) == nil
		}
	case "ES256":
		pub, isEC := key.(*ecdsa.PublicKey)
		if !isEC || pub.Curve != elliptic.P256() {
			return wrongKey
		}
		if len(value) != 64 {
			return errors.New("its ES256 signature is not 64 bytes")
		}
		var digest []byte
		if digest, err = signingDigest(sig, c); err != nil {
			return err
		}
		ok = ecdsa.Verify(pub, digest, new(big.Int).SetBytes(value[:32]), new(big.Int).SetBytes(value[32:]))
	case "EdDSA":
		pub, isEd := key.(ed25519.PublicKey)
		if !isEd {
			return wrongKey
		}
		if ok, err = verifyEd25519(pub, value, func(w io.Writer) error { return signingInput(w, sig, c) }); err != nil {
			return err
		}
	case "none":
		return errors.New(`alg "none" is no signature`)
	default:
		return fmt.Errorf("alg %q is not one of RS256, PS256, ES256, EdDSA", alg)
	}
	if !ok {
		return errors.New("the signature does not match the payload and protected header")
	}
	return nil
}

// signingInput writes the JWS Signing Input (RFC 7515, section 5.1 step
// 8): the protected header, a period, the payload as sent.
func signingInput(w io.Writer, sig Signature, c Check) error {
	p, err := c.Payload()
	if err != nil {
		return &ReadError{err}
	}
	io.WriteString(w, sig.Protected)
	w.Write([]byte{'.'})
	if _, err := io.Copy(w, p); err != nil {
		return &ReadError{err}
	}
	return nil
}

func signingDigest(sig Signature, c Check) ([]byte, error) {
	h := sha256.New()
	if err := signingInput(h, sig, c); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// ReadError is a failure to read the payload again: the server's, not
// the signature's.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return "read the payload again: " + e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// Package jwstest makes what the signature tests check: a test CA, leaf
// certificates, and JWS signatures (RS256, PS256, ES256, EdDSA) of a
// payload, made with the standard library alone, apart from the code
// that verifies them (internal/jws).
package jwstest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

// CA is a self-signed test root.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// NewCA makes a root valid ten years from now.
func NewCA(t testing.TB, name string) CA {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	return CA{Issue(t, name, k, nil, nil, true, time.Now().AddDate(10, 0, 0), x509.KeyUsageCertSign), k}
}

// PEM is the root's certificate as PEM.
func (c CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Cert.Raw})
}

// Leaf issues a certificate for key, valid until until, with key usage ku.
func (c CA) Leaf(t testing.TB, key crypto.Signer, until time.Time, ku x509.KeyUsage) *x509.Certificate {
	return Issue(t, "Recorder 7", key, c.Cert, c.Key, false, until, ku)
}

// Issue makes a certificate for key signed by parent (self-signed when
// nil), valid from a year ago to until.
func Issue(t testing.TB, cn string, key crypto.Signer, parent *x509.Certificate, parentKey crypto.Signer, ca bool, until time.Time, ku x509.KeyUsage) *x509.Certificate {
	t.Helper()
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().AddDate(-1, 0, 0), NotAfter: until, KeyUsage: ku, BasicConstraintsValid: true, IsCA: ca}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// B64 is base64url without padding.
func B64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// X5c is the chain as x5c holds it.
func X5c(certs ...*x509.Certificate) []string {
	var out []string
	for _, c := range certs {
		out = append(out, base64.StdEncoding.EncodeToString(c.Raw))
	}
	return out
}

// Sig is one signature as the General JSON Serialization writes it.
type Sig struct {
	Protected string          `json:"protected"`
	Header    json.RawMessage `json:"header,omitempty"`
	Signature string          `json:"signature"`
}

// Sign signs the payload (its base64url) with key under the protected
// header hdr, alg set to alg; an alg it cannot make gets a junk value.
func Sign(t testing.TB, alg string, key crypto.Signer, hdr map[string]any, payload string) Sig {
	t.Helper()
	hdr["alg"] = alg
	hb, _ := json.Marshal(hdr)
	prot := B64(hb)
	input := []byte(prot + "." + payload)
	digest := sha256.Sum256(input)
	var sig []byte
	var err error
	switch alg {
	case "RS256":
		sig, err = rsa.SignPKCS1v15(rand.Reader, key.(*rsa.PrivateKey), crypto.SHA256, digest[:])
	case "PS256":
		sig, err = rsa.SignPSS(rand.Reader, key.(*rsa.PrivateKey), crypto.SHA256, digest[:], &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
	case "ES256":
		r, s, e := ecdsa.Sign(rand.Reader, key.(*ecdsa.PrivateKey), digest[:])
		sig, err = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...), e
	case "EdDSA":
		sig = ed25519.Sign(key.(ed25519.PrivateKey), input)
	default:
		sig = []byte("not a signature")
	}
	if err != nil {
		t.Fatal(err)
	}
	return Sig{Protected: prot, Signature: B64(sig)}
}

// Signed is the signed vCon of payload (its base64url) with sigs.
func Signed(payload string, sigs ...Sig) []byte {
	b, _ := json.Marshal(struct {
		Payload    string `json:"payload"`
		Signatures []Sig  `json:"signatures"`
	}{payload, sigs})
	return b
}

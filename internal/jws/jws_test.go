package jws

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/jwstest"
)

var now = time.Now()

func sign(t *testing.T, alg string, key crypto.Signer, hdr map[string]any, payload string) Signature {
	s := jwstest.Sign(t, alg, key, hdr, payload)
	return Signature{Protected: s.Protected, Value: s.Signature}
}

var (
	b64 = jwstest.B64
	x5c = jwstest.X5c
)

type pki struct {
	jwstest.CA
	anchors *x509.CertPool
}

func newPKI(t *testing.T) pki {
	ca := jwstest.NewCA(t, "Test Root")
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pki{ca, pool}
}

func (p pki) leaf(t *testing.T, key crypto.Signer, until time.Time, ku x509.KeyUsage) *x509.Certificate {
	return p.Leaf(t, key, until, ku)
}

const uuid = "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41"

func check(p pki, payload string) Check {
	return Check{Anchors: p.anchors, Now: now, UUID: uuid, Payload: func() (io.Reader, error) { return strings.NewReader(payload), nil }}
}

// TestVerify: each algorithm verifies with a chain to the anchor, and
// each way a signature can fail is refused with its reason.
func TestVerify(t *testing.T) {
	p := newPKI(t)
	payload := b64([]byte(`{"uuid":"` + uuid + `","vcon":"0.4.0"}`))
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	sigUse := x509.KeyUsageDigitalSignature
	for alg, key := range map[string]crypto.Signer{"RS256": rsaKey, "PS256": rsaKey, "ES256": ecKey, "EdDSA": edKey} {
		leaf := p.leaf(t, key, now.AddDate(1, 0, 0), sigUse)
		s, err := Verify(sign(t, alg, key, map[string]any{"x5c": x5c(leaf), "uuid": uuid}, payload), check(p, payload))
		if err != nil || s.Alg != alg || s.Subject != "CN=Recorder 7" || s.Issuer != "CN=Test Root" || len(s.Fingerprint) != 64 {
			t.Errorf("%s: %+v %v", alg, s, err)
		}
	}

	leaf := p.leaf(t, ecKey, now.AddDate(1, 0, 0), sigUse)
	good := func() Signature { return sign(t, "ES256", ecKey, map[string]any{"x5c": x5c(leaf)}, payload) }
	other := newPKI(t)
	expired := p.leaf(t, ecKey, now.AddDate(0, 0, -1), sigUse)
	noSigning := p.leaf(t, ecKey, now.AddDate(1, 0, 0), x509.KeyUsageKeyEncipherment)
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	smallLeaf := p.leaf(t, small, now.AddDate(1, 0, 0), sigUse)
	withHeader := good()
	withHeader.Header = []byte(`{"uuid": "3d9c1e7a-52b4-4f08-a6c3-0b9e2d714f5c"}`)
	for name, c := range map[string]struct {
		sig     Signature
		payload string
		check   Check
		want    string
	}{
		"a changed payload":      {good(), payload[:len(payload)-2] + "fQ", Check{}, "the signature does not match"},
		"another CA":             {good(), payload, check(other, payload), "does not verify to the tenant's trust anchors: x509: certificate signed by unknown authority"},
		"expired":                {sign(t, "ES256", ecKey, map[string]any{"x5c": x5c(expired)}, payload), payload, Check{}, "certificate has expired or is not yet valid"},
		"alg none":               {sign(t, "none", ecKey, map[string]any{"x5c": x5c(leaf)}, payload), payload, Check{}, `alg "none" is no signature`},
		"a MAC":                  {sign(t, "HS256", ecKey, map[string]any{"x5c": x5c(leaf)}, payload), payload, Check{}, `alg "HS256" is not one of`},
		"a header uuid":          {withHeader, payload, Check{}, `the header's uuid "3d9c1e7a-52b4-4f08-a6c3-0b9e2d714f5c" is not the payload's`},
		"x5u only":               {sign(t, "ES256", ecKey, map[string]any{"x5u": "https://example.com/c.pem"}, payload), payload, Check{}, "x5u only, which the server never fetches"},
		"no chain":               {sign(t, "ES256", ecKey, map[string]any{}, payload), payload, Check{}, "no certificate chain"},
		"key usage":              {sign(t, "ES256", ecKey, map[string]any{"x5c": x5c(noSigning)}, payload), payload, Check{}, "key usage does not allow signing"},
		"a small RSA key":        {sign(t, "RS256", small, map[string]any{"x5c": x5c(smallLeaf)}, payload), payload, Check{}, "RSA key has 1024 bits"},
		"alg against the key":    {sign(t, "RS256", rsaKey, map[string]any{"x5c": x5c(leaf)}, payload), payload, Check{}, "alg RS256 does not fit"},
		"no protected header":    {Signature{Value: "AAAA"}, payload, Check{}, "no protected header"},
		"crit":                   {sign(t, "ES256", ecKey, map[string]any{"x5c": x5c(leaf), "crit": []string{"b64"}, "b64": false}, payload), payload, Check{}, "crit names"},
		"too long a chain":       {sign(t, "ES256", ecKey, map[string]any{"x5c": x5c(leaf, leaf, leaf, leaf, leaf, leaf, leaf, leaf, leaf, leaf, leaf)}, payload), payload, Check{}, "more than 10"},
		"padded protected":       {Signature{Protected: good().Protected + "=", Value: good().Value}, payload, Check{}, "is not base64url"},
		"a tenant without roots": {good(), payload, Check{UUID: uuid}, "the tenant has no trust anchor"},
	} {
		chk := c.check
		if chk.Payload == nil {
			anchors := chk.Anchors
			chk = check(p, c.payload)
			if c.check.UUID != "" {
				chk.Anchors = anchors
			}
		}
		if _, err := Verify(c.sig, chk); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// TestEd25519Streaming: the streamed verification agrees with
// crypto/ed25519 on good signatures, and refuses any changed byte.
func TestEd25519Streaming(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	for _, n := range []int{0, 1, 63, 64, 1000, 100000} {
		msg := make([]byte, n)
		rand.Read(msg)
		sig := ed25519.Sign(priv, msg)
		write := func(m []byte) func(io.Writer) error {
			return func(w io.Writer) error { _, err := io.Copy(w, bytes.NewReader(m)); return err }
		}
		if ok, err := verifyEd25519(pub, sig, write(msg)); !ok || err != nil {
			t.Errorf("%d bytes: %v %v", n, ok, err)
		}
		bad := append([]byte(nil), sig...)
		bad[n%64] ^= 1
		if ok, _ := verifyEd25519(pub, bad, write(msg)); ok {
			t.Errorf("%d bytes: a changed signature verifies", n)
		}
		if n > 0 {
			msg[0] ^= 1
			if ok, _ := verifyEd25519(pub, sig, write(msg)); ok {
				t.Errorf("%d bytes: a changed message verifies", n)
			}
		}
	}
}

// TestChainsRemembered: a chain verified once is not verified again for
// the same anchors, but holds only within its certificates' validity and
// for those anchors.
func TestChainsRemembered(t *testing.T) {
	p := newPKI(t)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := p.leaf(t, key, now.AddDate(0, 0, 10), x509.KeyUsageDigitalSignature)
	payload := b64([]byte(`{"uuid":"` + uuid + `"}`))
	sig := sign(t, "ES256", key, map[string]any{"x5c": x5c(leaf)}, payload)
	var chains Chains
	c := check(p, payload)
	c.Chains, c.AnchorsKey = &chains, "acme@1"
	if _, err := Verify(sig, c); err != nil {
		t.Fatal(err)
	}
	// The same chain and anchors: no verification, even with no pool.
	remembered := c
	remembered.Anchors = nil
	if _, err := Verify(sig, remembered); err != nil {
		t.Errorf("a remembered chain: %v", err)
	}
	for name, change := range map[string]func(*Check){
		"past the leaf's expiry": func(c *Check) { c.Now = now.AddDate(0, 0, 11); c.Anchors = p.anchors },
		"other anchors":          func(c *Check) { c.AnchorsKey = "acme@2"; c.Anchors = newPKI(t).anchors },
	} {
		c2 := c
		change(&c2)
		if _, err := Verify(sig, c2); err == nil || !strings.Contains(err.Error(), "does not verify to the tenant's trust anchors") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

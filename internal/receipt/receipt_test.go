package receipt

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// TestKeyID is RFC 8037's example key (appendix A.2) and its JWK
// thumbprint (appendix A.3).
func TestKeyID(t *testing.T) {
	x, _ := base64.RawURLEncoding.DecodeString("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
	if got := KeyID(ed25519.PublicKey(x)); got != "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k" {
		t.Fatalf("thumbprint %s", got)
	}
}

// testKey is RFC 8037's example key (appendix A.1).
func testKey(t *testing.T) (ed25519.PrivateKey, Set) {
	t.Helper()
	seed, _ := base64.RawURLEncoding.DecodeString("nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A")
	key := ed25519.NewKeyFromSeed(seed)
	return key, Set{Keys: []JWK{PublicJWK(key.Public().(ed25519.PublicKey))}}
}

func TestSignVerify(t *testing.T) {
	key, set := testKey(t)
	p := Payload{Erasure: "e", Tenant: "t", Filter: "tel", Erased: []Item{{UUID: "u", Versions: 2, Whole: true}}, Held: []string{}}
	jws, err := Sign(key, p)
	if err != nil {
		t.Fatal(err)
	}
	got, kid, err := Verify(jws, set)
	if err != nil || kid != set.Keys[0].Kid || got.Erased[0].Versions != 2 {
		t.Fatalf("verify: %+v %s %v", got, kid, err)
	}
	parts := strings.Split(jws, ".")
	enc := base64.RawURLEncoding.EncodeToString
	other := ed25519.NewKeyFromSeed(make([]byte, 32))
	for name, bad := range map[string]string{
		"a payload changed":             parts[0] + "." + enc([]byte(`{"erasure":"f"}`)) + "." + parts[2],
		"alg none":                      enc([]byte(`{"alg":"none","kid":"`+kid+`"}`)) + "." + parts[1] + ".",
		"another key's kid":             enc([]byte(`{"alg":"EdDSA","kid":"`+KeyID(other.Public().(ed25519.PublicKey))+`"}`)) + "." + parts[1] + "." + parts[2],
		"a signature cut short":         parts[0] + "." + parts[1] + "." + parts[2][:20],
		"two parts":                     parts[0] + "." + parts[1],
		"a line break in the signature": parts[0] + "." + parts[1] + "." + parts[2][:40] + "\n" + parts[2][40:],
	} {
		if _, _, err := Verify(bad, set); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// sameBytes returns s with its last character changed to another that a
// lenient decoder reads as the same bytes: the bits it carries past the
// last byte are set.
func sameBytes(t *testing.T, s string) string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, s[len(s)-1])
	changed := s[:len(s)-1] + string(alphabet[last^1])
	a, err1 := base64.RawURLEncoding.DecodeString(s)
	b, err2 := base64.RawURLEncoding.DecodeString(changed)
	if err1 != nil || err2 != nil || string(a) != string(b) {
		t.Fatalf("%q and %q do not decode to the same bytes", s, changed)
	}
	return changed
}

// TestStrictBase64: a signature whose last character is changed to one
// that decodes, leniently, to the same 64 bytes is refused, and so is a
// key whose x is spelled so.
func TestStrictBase64(t *testing.T) {
	key, set := testKey(t)
	jws, err := Sign(key, Payload{Erasure: "e", Tenant: "t", Filter: "uuids", Erased: []Item{}, Held: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	dot := strings.LastIndexByte(jws, '.') + 1
	if _, _, err := Verify(jws[:dot]+sameBytes(t, jws[dot:]), set); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "signature is not 64 bytes of base64url") {
		t.Errorf("the signature's last character changed: %v, want it refused", err)
	}
	bent := Set{Keys: []JWK{set.Keys[0]}}
	bent.Keys[0].X = sameBytes(t, bent.Keys[0].X)
	if _, _, err := Verify(jws, bent); !errors.Is(err, ErrKeySet) || !strings.Contains(err.Error(), "not an Ed25519 public key") {
		t.Errorf("the key's x with its last character changed: %v, want it refused", err)
	}
}

// TestKidThumbprint: a key set whose kid is not its key's thumbprint is
// refused, naming the kid, even when the receipt names that kid.
func TestKidThumbprint(t *testing.T) {
	key, set := testKey(t)
	jws, err := Sign(key, Payload{Erasure: "e", Tenant: "t", Filter: "uuids", Erased: []Item{}, Held: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	other := PublicJWK(ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey))
	// The other key under the receipt's kid, and beside it the right key
	// under a made-up one.
	swapped := Set{Keys: []JWK{set.Keys[0], other}}
	swapped.Keys[0].Kid, swapped.Keys[1].Kid = "made-up", set.Keys[0].Kid
	for name, s := range map[string]Set{
		"a made-up kid":      {Keys: []JWK{{Kty: "OKP", Crv: "Ed25519", X: set.Keys[0].X, Kid: "made-up"}}},
		"kids swapped":       swapped,
		"another key's kid":  {Keys: []JWK{set.Keys[0], {Kty: "OKP", Crv: "Ed25519", X: other.X, Kid: set.Keys[0].Kid}}},
		"an RSA key with it": {Keys: []JWK{set.Keys[0], {Kty: "RSA", Kid: "made-up"}}},
	} {
		if _, _, err := Verify(jws, s); !errors.Is(err, ErrKeySet) || !strings.Contains(err.Error(), `"`) {
			t.Errorf("%s: %v, want ErrKeySet naming the kid", name, err)
		}
	}
	// A receipt that names its key by the made-up kid, signed by that key:
	// everything holds but the kid.
	enc := base64.RawURLEncoding.EncodeToString
	input := enc([]byte(`{"alg":"EdDSA","kid":"made-up"}`)) + "." + strings.Split(jws, ".")[1]
	madeUp := input + "." + enc(ed25519.Sign(key, []byte(input)))
	if _, _, err := Verify(madeUp, Set{Keys: []JWK{{Kty: "OKP", Crv: "Ed25519", X: set.Keys[0].X, Kid: "made-up"}}}); !errors.Is(err, ErrKeySet) || !strings.Contains(err.Error(), `"made-up"`) {
		t.Errorf("a receipt under a made-up kid: %v, want ErrKeySet naming the kid", err)
	}
	if _, err := ParseSet([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"` + set.Keys[0].X + `","kid":"made-up"}]}`)); !errors.Is(err, ErrKeySet) || !strings.Contains(err.Error(), `"made-up"`) {
		t.Errorf("ParseSet of a made-up kid: %v", err)
	}
	if got, err := ParseSet([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"` + set.Keys[0].X + `","kid":"` + set.Keys[0].Kid + `"}]}`)); err != nil || len(got.Keys) != 1 {
		t.Errorf("ParseSet of the right kid: %v", err)
	}
}

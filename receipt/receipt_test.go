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

func TestSignVerify(t *testing.T) {
	seed, _ := base64.RawURLEncoding.DecodeString("nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A")
	key := ed25519.NewKeyFromSeed(seed)
	set := Set{Keys: []JWK{PublicJWK(key.Public().(ed25519.PublicKey))}}
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
		"a payload changed":     parts[0] + "." + enc([]byte(`{"erasure":"f"}`)) + "." + parts[2],
		"alg none":              enc([]byte(`{"alg":"none","kid":"`+kid+`"}`)) + "." + parts[1] + ".",
		"another key's kid":     enc([]byte(`{"alg":"EdDSA","kid":"`+KeyID(other.Public().(ed25519.PublicKey))+`"}`)) + "." + parts[1] + "." + parts[2],
		"a signature cut short": parts[0] + "." + parts[1] + "." + parts[2][:20],
		"two parts":             parts[0] + "." + parts[1],
	} {
		if _, _, err := Verify(bad, set); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

package server_test

import (
	"encoding/base64"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestStoreRefusesAmbiguousBodies: a vCon that repeats a member the server
// reads, in any of the three forms, and a body with NaN or Infinity are
// refused with 400 saying which, and nothing is stored.
func TestStoreRefusesAmbiguousBodies(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	a, b := ids.NewRandom().String(), ids.NewRandom().String()
	payload := base64.RawURLEncoding.EncodeToString([]byte(`{"uuid":"` + a + `","uuid":"` + b + `"}`))
	const dup = ": it appears twice in one object, and JSON parsers disagree on which one counts; send it once"
	const nan = "NaN and Infinity are not JSON numbers; send null or a string instead"
	for _, c := range []struct{ name, body, error string }{
		{"unsigned", `{"uuid":"` + a + `","uuid":"` + b + `"}`, "duplicate member uuid" + dup},
		{"signed header", `{"payload":"e30","signatures":[{"header":{"uuid":"` + a + `","uuid":"` + b + `"},"signature":""}]}`, "duplicate member signatures[0].header.uuid" + dup},
		{"signed payload", `{"payload":"` + payload + `","signatures":[{"signature":""}]}`, "duplicate member uuid in the payload" + dup},
		{"signed signatures", `{"payload":"e30","signatures":[],"signatures":[{"header":{"uuid":"` + a + `"}}]}`, "duplicate member signatures" + dup},
		{"encrypted", `{"ciphertext":"","recipients":[],"unprotected":{"uuid":"` + a + `","uuid":"` + b + `"}}`, "duplicate member unprotected.uuid" + dup},
		{"NaN", `{"uuid":"` + a + `","score":NaN}`, "not valid JSON: unexpected character 'N' at byte 55, want a value: " + nan},
		{"-Infinity", `{"uuid":"` + a + `","score":-Infinity}`, "not valid JSON: unexpected character 'I' at byte 56, want a digit: " + nan},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.Do("POST", "/vcons", k.Token, []byte(c.body), "Content-Type", "application/vcon")
			var got struct{ Error string }
			r.JSON(t, &got)
			if want := "not a vCon this server can keep: " + c.error; r.Status != 400 || got.Error != want {
				t.Errorf("%d %q, want 400 %q", r.Status, got.Error, want)
			}
		})
	}
	for _, u := range []string{a, b} {
		if r := e.Do("GET", "/vcons/"+u, k.Token, nil); r.Status != 404 {
			t.Errorf("GET %s: %d, want 404: a refused vCon was stored", u, r.Status)
		}
	}
}

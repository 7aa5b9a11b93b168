package vcon

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzInspect: Inspect never panics, agrees with encoding/json.Valid on
// what is JSON, and, on JSON it can read, with the encoding/json reading
// of the same rules; a gzip copy of the input reads the same.
func FuzzInspect(f *testing.F) {
	entries, err := os.ReadDir(projectDir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".vcon" {
			b, err := os.ReadFile(filepath.Join(projectDir, e.Name()))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	for _, s := range []string{
		`{"uuid": "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41", "subject": "\ud83d\ude9a\ud800", "n": [-0.5e+3, true, null]}`,
		`{"payload": "eyJ1dWlkIjoiMDE4ZjZiMmUtNGMxYS03ZDNlLTlhNTEtNmMyZjBlOGI3ZDQxIn0", "signatures": []}`,
		`{"ciphertext": "", "recipients": [], "unprotected": {"uuid": "018f6b2e-4c1a-7d3e-9a51-6c2f0e8b7d41"}}`,
		`[[[]]]`, `{"a":{"a":{}}}`, `"x"`, `{}`, ``, `{"a" : 1 , }`, "{\"a\": \"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	const limit = 1 << 20
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Inspect(bytes.NewReader(data), false, limit)
		valid := json.Valid(data)
		var inv *InvalidError
		switch {
		case err == nil:
			if !valid {
				t.Fatalf("accepted, but encoding/json calls it invalid")
			}
			if m.Size != int64(len(data)) {
				t.Fatalf("Size %d, want %d", m.Size, len(data))
			}
		case errors.As(err, &inv):
			if inv.syntax && valid {
				t.Fatalf("refused as not JSON (%s), but encoding/json calls it valid", inv.Reason)
			}
		case errors.Is(err, ErrTooLarge):
		default:
			t.Fatalf("unexpected error %v", err)
		}
		if valid && refDepth(data) <= maxDepth {
			want, why := refInspect(data, limit)
			switch {
			case why == "" && err != nil:
				t.Fatalf("refused (%v), but the encoding/json reading accepts it", err)
			case why == "too large" && !errors.Is(err, ErrTooLarge):
				t.Fatalf("error %v, but the encoding/json reading says too large", err)
			case why != "" && err == nil:
				t.Fatalf("accepted, but the encoding/json reading says %s", why)
			case why == "" && err == nil:
				if d := diffMeta(m, want); d != "" {
					t.Fatalf("differs from the encoding/json reading: %s", d)
				}
			}
		}
		zm, zerr := Inspect(bytes.NewReader(gzipBytes(t, data)), true, limit)
		if (err == nil) != (zerr == nil) {
			t.Fatalf("plain: %v, gzipped: %v", err, zerr)
		}
		if err == nil {
			zm.Gzip, zm.Size = m.Gzip, m.Size
			if d := diffMeta(zm, m); d != "" {
				t.Fatalf("gzipped: %s", d)
			}
		}
	})
}

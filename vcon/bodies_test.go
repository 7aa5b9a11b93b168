package vcon

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestWithoutDialogBodies: every dialog's body becomes null and nothing
// else changes but white space; a body nested deep, a body key elsewhere
// and strings with escapes are read right; what is still over the limit,
// and what is not JSON, are refused.
func TestWithoutDialogBodies(t *testing.T) {
	in := "\xef\xbb\xbf" + `{"vcon": "0.4.0", "uuid": "u", "body": "top",
	  "parties": [{"name": "A \"q\" \\ b", "body": 1}],
	  "dialog": [{"type": "recording", "body": "` + strings.Repeat("QUJD", 100000) + `", "encoding": "base64url"},
	             {"type": "text", "body": {"x": [1, {"y": "}]"}], "z": null}, "parties": [0]},
	             {"type": "transfer"}],
	  "attachments": [{"body": "kept", "n": -1.5e3, "t": true}]}`
	out, n, err := WithoutDialogBodies(strings.NewReader(in), 4096)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"vcon":"0.4.0","uuid":"u","body":"top","parties":[{"name":"A \"q\" \\ b","body":1}],` +
		`"dialog":[{"type":"recording","body":null,"encoding":"base64url"},{"type":"text","body":null,"parties":[0]},{"type":"transfer"}],` +
		`"attachments":[{"body":"kept","n":-1.5e3,"t":true}]}`
	if string(out) != want || n != 2 {
		t.Errorf("got %d dropped\n%s\nwant\n%s", n, out, want)
	}
	if !json.Valid(out) {
		t.Error("not JSON")
	}
	if _, _, err := WithoutDialogBodies(strings.NewReader(in), 100); !errors.Is(err, ErrOverLimit) {
		t.Errorf("over the limit: %v", err)
	}
	for _, bad := range []string{`{"dialog":[{"body":"x"}]`, `{"a":1,}`, `{"a" 1}`, `[1,]`, `[1,]]`, `{"a":1} {}`, `"x`} {
		if _, _, err := WithoutDialogBodies(strings.NewReader(bad), 4096); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

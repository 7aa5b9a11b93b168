package logline

import (
	"bytes"
	"regexp"
	"testing"
)

func TestLayout(t *testing.T) {
	var buf bytes.Buffer
	New(&buf, "info", "serve").Info("pack run", "files", 1, "versions", 1, "failed", 0)
	New(&buf, "info", "serve").Debug("hidden")
	re := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ  INFO vcon_server::serve: pack run files=1 versions=1 failed=0\n$`)
	if !re.MatchString(buf.String()) {
		t.Fatalf("got %q", buf.String())
	}
}

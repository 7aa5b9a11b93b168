package masterkey

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/config"
	"github.com/vcon-server/vcon-server/internal/kms"
)

// TestDamaged: a wrapped key file that is not the four lines of the format
// (docs/FORMAT.md, "The master key") is refused before the KMS is asked,
// naming what is wrong; the unwrap program here would refuse anything.
func TestDamaged(t *testing.T) {
	w, err := kms.New(&config.KMS{Provider: "command", Command: &config.Command{Wrap: []string{"/bin/false"}, Unwrap: []string{"/bin/false"}}})
	if err != nil {
		t.Fatal(err)
	}
	good := header + "\nkms: x\ncatalog: 0b9b6c1e-8a1f-4f55-9b7e-2f0c7a6d3e11\nciphertext: AAAA\n"
	for text, want := range map[string]string{
		header + "\nkms: x\n":                                      "it is not the four lines of a wrapped key",
		strings.Replace(good, "catalog: ", "catalogue: ", 1):       `line 3 is not "catalog: ..."`,
		strings.Replace(good, "0b9b6c1e-8a1f", "0b9b6c1e-8a1g", 1): "its catalog line is not a catalog id",
		strings.Replace(good, "AAAA", "AA A", 1):                   "its ciphertext line is not base64",
		good:                                                       "does not open: kms: command /bin/false: unwrap",
	} {
		path := filepath.Join(t.TempDir(), "master.key")
		if err := os.WriteFile(path, []byte(text), 0o400); err != nil {
			t.Fatal(err)
		}
		_, _, err := Load(context.Background(), path, w)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
}

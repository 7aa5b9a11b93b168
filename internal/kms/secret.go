package kms

import (
	"fmt"
	"strings"

	"github.com/vcon-server/vcon-server/internal/secretfile"
)

// maxSecretFile bounds a token or secret key file: both are under a
// hundred bytes, Vault's batch tokens a few hundred.
const maxSecretFile = 16 << 10

// readSecretFile reads a token or secret key file, trimmed of white space
// around it. Like the master key file (seal.LoadMasterKey), it is refused
// when group or others may use it: whoever reads it can ask the KMS to
// unwrap the master key. Its errors name the path but never the bytes.
func readSecretFile(path string) (string, error) {
	b, err := secretfile.Read(path, maxSecretFile)
	if err != nil {
		return "", fmt.Errorf("%s %w", path, err)
	}
	s := strings.TrimSpace(string(b))
	switch {
	case s == "":
		return "", fmt.Errorf("%s is empty", path)
	case strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		// It goes into a header or a signing key: one word, no controls.
		return "", fmt.Errorf("%s must hold one line without spaces or control characters", path)
	}
	return s, nil
}

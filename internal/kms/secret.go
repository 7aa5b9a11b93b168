package kms

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// maxSecretFile bounds a token or secret key file: both are under a
// hundred bytes, Vault's batch tokens a few hundred.
const maxSecretFile = 16 << 10

// readSecretFile reads a token or secret key file, trimmed of white space
// around it. Like the master key file (seal.LoadMasterKey), it is refused
// when group or others may use it: whoever reads it can ask the KMS to
// unwrap the master key. Its errors name the path but never the bytes.
func readSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("%s cannot be read: %w", path, err)
	}
	defer f.Close()
	// The mode checked is the mode of the open file, the bytes read.
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("%s cannot be read: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		what := "readable"
		if perm&0o044 == 0 {
			what = "writable or executable"
		}
		return "", fmt.Errorf("%s is %s by group or others (mode %04o); run: chmod 0600 %s (or 0400)", path, what, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return "", fmt.Errorf("%s cannot be read: %w", path, err)
	}
	if len(b) > maxSecretFile {
		return "", fmt.Errorf("%s is longer than %d KiB: it is not a token or secret key file", path, maxSecretFile>>10)
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

// Package toolbin finds the programs scripts/install-test-tools.sh
// installs (S3 servers, KMS servers), for the kits that run them
// (s3test, kmstest). A missing program skips the test loudly, or fails it
// when CI=true: CI must never pass by skipping its real-server tests.
package toolbin

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Dir is where scripts/install-test-tools.sh installs binaries:
// $VCON_TOOLS/bin, by default ~/.cache/vcon-server/tools/bin. It is ""
// when there is no home folder to put it in.
func Dir() string {
	root := os.Getenv("VCON_TOOLS")
	if root == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		root = filepath.Join(home, ".cache", "vcon-server", "tools")
	}
	return filepath.Join(root, "bin")
}

// Find returns the program name: the file the environment variable env
// names (VCON_TEST_MINIO, VCON_TEST_LOCALKMS), else Dir's, else the one on
// PATH. It returns "" when there is none.
func Find(name, env string) string {
	if env != "" {
		if p := os.Getenv(env); p != "" {
			return p
		}
	}
	if dir := Dir(); dir != "" {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return ""
}

// Require is Find for a test that cannot run without the program: when
// there is none the test is skipped with a message in capitals saying how
// to install it, or fails with that message when CI=true.
func Require(t testing.TB, name, env string) string {
	t.Helper()
	if p := Find(name, env); p != "" {
		return p
	}
	msg := fmt.Sprintf("NO %s BINARY: run scripts/install-test-tools.sh %s (installs into %s), or set %s; SKIPPING the tests against a real %s",
		strings.ToUpper(name), name, Dir(), env, name)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// RandomHex is n random bytes in hex: throwaway tokens and secrets of the
// servers a kit starts.
func RandomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// Tail is the last n bytes of a server's log, from a line's start, for a
// failure's report.
func Tail(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	b = b[len(b)-n:]
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return b
}

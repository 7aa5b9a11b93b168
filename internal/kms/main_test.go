package kms_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestMain makes the test binary the program of provider command's tests
// when it runs as one: the provider always sets VCON_KMS_OP, and passes
// the program's mode and key file as arguments (its environment holds
// nothing else of the test's).
func TestMain(m *testing.M) {
	if op := os.Getenv("VCON_KMS_OP"); op != "" {
		os.Exit(program(op, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// program is a real key-wrapping program: AES-256-GCM with the key in a
// file (hex), the context as associated data, nonce before ciphertext;
// exit status 2 when the ciphertext does not open, as the contract of
// provider command asks. Its other modes misbehave on purpose.
func program(op string, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: MODE [KEYFILE]")
		return 1
	}
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "read stdin:", err)
		return 1
	}
	switch args[0] {
	case "aesgcm":
		return aesGCM(op, args[1], input)
	case "refuse":
		fmt.Fprintln(os.Stderr, "key handle 7 is revoked\nsecond line, not shown")
		return 2
	case "fail":
		fmt.Fprintln(os.Stderr, "the HSM is not answering")
		return 1
	case "hang":
		os.WriteFile(args[1], []byte(fmt.Sprint(os.Getpid())), 0o600)
		time.Sleep(time.Hour)
		return 0
	case "flood":
		chunk := bytes.Repeat([]byte("x"), 4096)
		for {
			if _, err := os.Stdout.Write(chunk); err != nil {
				return 1
			}
		}
	case "silent":
		return 0
	case "env":
		env := os.Environ()
		sort.Strings(env)
		wd, _ := os.Getwd()
		fmt.Printf("%s\nwd=%s\n", strings.Join(env, "\n"), wd)
		return 0
	case "leak":
		// A program that puts what it was given on stderr: the provider
		// must not carry it into its error.
		fmt.Fprintf(os.Stderr, "cannot wrap %x\n", input)
		return 1
	}
	fmt.Fprintln(os.Stderr, "unknown mode", args[0])
	return 1
}

func aesGCM(op, keyFile string, input []byte) int {
	hexKey, err := os.ReadFile(keyFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "read key file:", err)
		return 1
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(hexKey)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "key file: not hex")
		return 1
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		fmt.Fprintln(os.Stderr, "key:", err)
		return 1
	}
	aead, _ := cipher.NewGCM(block)
	aad := []byte(os.Getenv("VCON_KMS_CONTEXT"))
	switch op {
	case "wrap":
		nonce := make([]byte, aead.NonceSize())
		rand.Read(nonce)
		os.Stdout.Write(aead.Seal(nonce, nonce, input, aad))
		return 0
	case "unwrap":
		if len(input) < aead.NonceSize() {
			fmt.Fprintln(os.Stderr, "ciphertext too short")
			return 2
		}
		plain, err := aead.Open(nil, input[:aead.NonceSize()], input[aead.NonceSize():], aad)
		if err != nil {
			fmt.Fprintln(os.Stderr, "refused:", err)
			return 2
		}
		os.Stdout.Write(plain)
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown VCON_KMS_OP", op)
	return 1
}

package seal

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testMasterBytes has bytes that base64 spells with '+', '/', '-' and '_',
// so the standard and URL alphabets differ.
var testMasterBytes = []byte{
	0xfb, 0xff, 0xbf, 0xfe, 0x3e, 0x7f, 0xfb, 0xef, 0xbe, 0xf8, 0x00, 0x01,
	0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d,
	0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0xfe, 0xff,
}

func newMaster(t *testing.T, b []byte) *MasterKey {
	t.Helper()
	m, err := MasterKeyFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestWrapUnwrap(t *testing.T) {
	m := newMaster(t, testMasterBytes)
	dk := newKey(t)
	wrapped, err := m.Wrap(dk, tenantA, version1)
	if err != nil {
		t.Fatal(err)
	}
	if len(wrapped) != WrappedSize || WrappedSize != 61 || wrapped[0] != 1 {
		t.Fatalf("wrapped key is %d bytes starting %#x", len(wrapped), wrapped[0])
	}
	if got, err := m.Unwrap(wrapped, tenantA, version1); err != nil || got != dk {
		t.Fatalf("Unwrap = %v", err)
	}
	again, _ := m.Wrap(dk, tenantA, version1)
	if bytes.Equal(again, wrapped) {
		t.Fatal("two wraps of one key are identical: the nonce is not fresh")
	}
	if bytes.Contains(wrapped, dk[:8]) {
		t.Fatal("wrapped key holds clear key bytes")
	}

	other := newMaster(t, bytes.Repeat([]byte{9}, 32))
	refuse := func(what string, m *MasterKey, w []byte, tenant, version [16]byte) {
		t.Helper()
		if _, err := m.Unwrap(w, tenant, version); !errors.Is(err, ErrDamaged) {
			t.Errorf("%s: Unwrap = %v, want ErrDamaged", what, err)
		}
	}
	refuse("other tenant", m, wrapped, tenantB, version1)
	refuse("other version", m, wrapped, tenantA, version2)
	refuse("other master key", other, wrapped, tenantA, version1)
	refuse("empty", m, nil, tenantA, version1)
	refuse("truncated", m, wrapped[:60], tenantA, version1)
	refuse("byte appended", m, append(bytes.Clone(wrapped), 0), tenantA, version1)
	for i := range len(wrapped) * 8 {
		bad := bytes.Clone(wrapped)
		bad[i/8] ^= 1 << (i % 8)
		refuse(fmt.Sprintf("bit %d flipped", i), m, bad, tenantA, version1)
	}
}

func TestCheckValue(t *testing.T) {
	m := newMaster(t, testMasterBytes)
	c := m.CheckValue()
	if len(c) != CheckSize || CheckSize != 16 {
		t.Fatalf("check value is %d bytes", len(c))
	}
	c[0] ^= 1 // a caller changing its copy changes nothing
	if !bytes.Equal(m.CheckValue(), newMaster(t, testMasterBytes).CheckValue()) {
		t.Fatal("check value is not stable for one key")
	}
	if bytes.Equal(m.CheckValue(), newMaster(t, bytes.Repeat([]byte{9}, 32)).CheckValue()) {
		t.Fatal("two keys have one check value")
	}
	if bytes.Contains(testMasterBytes, m.CheckValue()[:4]) {
		t.Fatal("check value shows key bytes")
	}
}

func TestMasterKeyFromBytes(t *testing.T) {
	for _, n := range []int{0, 16, 31, 33, 64} {
		if _, err := MasterKeyFromBytes(make([]byte, n)); err == nil {
			t.Errorf("a %d-byte master key was accepted", n)
		}
	}
}

func TestKeysDoNotPrint(t *testing.T) {
	dk := DataKey{0xab, 0xcd, 0xef}
	m := newMaster(t, testMasterBytes)
	for _, s := range []string{
		fmt.Sprintf("%v %s %x %X %#v %+v %q %d", dk, dk, dk, dk, dk, dk, dk, dk),
		fmt.Sprintf("%v %s %x %#v %+v", m, m, m, m, m),
		fmt.Sprint(dk, m, []DataKey{dk}, struct{ K DataKey }{dk}),
	} {
		if strings.Contains(strings.ToLower(s), "abcdef") || strings.Contains(s, "171") || strings.Contains(strings.ToLower(s), "fbffbf") {
			t.Errorf("key bytes printed: %s", s)
		}
	}
}

// writeKeyFile writes data at mode perm, whatever the umask.
func writeKeyFile(t *testing.T, data []byte, perm os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "master.key")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadMasterKey(t *testing.T) {
	want := newMaster(t, testMasterBytes).CheckValue()
	for _, c := range []struct {
		name string
		data string
		perm os.FileMode
	}{
		{"raw", string(testMasterBytes), 0o400},
		{"raw, owner writable", string(testMasterBytes), 0o600},
		{"base64", base64.StdEncoding.EncodeToString(testMasterBytes), 0o400},
		{"base64 with newline", base64.StdEncoding.EncodeToString(testMasterBytes) + "\n", 0o400},
		{"base64 unpadded", base64.RawStdEncoding.EncodeToString(testMasterBytes) + "\n", 0o400},
		{"base64url", base64.URLEncoding.EncodeToString(testMasterBytes), 0o400},
		{"base64url unpadded with CRLF", base64.RawURLEncoding.EncodeToString(testMasterBytes) + " \r\n", 0o400},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := LoadMasterKey(writeKeyFile(t, []byte(c.data), c.perm))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(m.CheckValue(), want) {
				t.Fatal("loaded another key")
			}
		})
	}
}

func TestLoadMasterKeyRefusesOpenModes(t *testing.T) {
	for _, c := range []struct {
		perm os.FileMode
		what string
	}{
		{0o644, "is readable by group or others (mode 0644)"},
		{0o440, "is readable by group or others (mode 0440)"},
		{0o404, "is readable by group or others (mode 0404)"},
		{0o420, "is writable or executable by group or others (mode 0420)"},
	} {
		path := writeKeyFile(t, testMasterBytes, c.perm)
		_, err := LoadMasterKey(path)
		want := "seal: master key file " + path + " " + c.what + "; run: chmod 0400 " + path
		if err == nil || err.Error() != want {
			t.Errorf("mode %04o: err = %v\nwant %s", c.perm, err, want)
		}
	}
}

func TestLoadMasterKeyRefusesWrongContent(t *testing.T) {
	for _, data := range [][]byte{
		nil,
		testMasterBytes[:31],
		append(bytes.Clone(testMasterBytes), 0),
		append(bytes.Clone(testMasterBytes), '\n'), // raw keys are exactly 32 bytes
		[]byte(base64.StdEncoding.EncodeToString(testMasterBytes[:31])),
		[]byte(base64.StdEncoding.EncodeToString(append(bytes.Clone(testMasterBytes), 1))),
		[]byte(hex.EncodeToString(testMasterBytes)),
		[]byte(" " + base64.StdEncoding.EncodeToString(testMasterBytes)),
		bytes.Repeat([]byte("A"), 10000),
	} {
		path := writeKeyFile(t, data, 0o400)
		_, err := LoadMasterKey(path)
		want := "seal: master key file " + path + " must hold 32 bytes, raw or base64"
		if err == nil || err.Error() != want {
			t.Errorf("%q: err = %v", data, err)
		}
	}
	if _, err := LoadMasterKey(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := LoadMasterKey(t.TempDir()); err == nil {
		t.Error("a directory was loaded as a key")
	}
}

func TestCreateMasterKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "master.key")
	if err := CreateMasterKeyFile(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o400 || fi.Size() != KeySize {
		t.Fatalf("key file has mode %v and %d bytes", fi.Mode(), fi.Size())
	}
	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadMasterKey(path); err != nil {
		t.Fatal(err)
	}

	err = CreateMasterKeyFile(path)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second create = %v, want fs.ErrExist", err)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, first) {
		t.Fatal("an existing key file was overwritten")
	}

	other := filepath.Join(t.TempDir(), "master.key")
	if err := CreateMasterKeyFile(other); err != nil {
		t.Fatal(err)
	}
	if second, _ := os.ReadFile(other); bytes.Equal(second, first) {
		t.Fatal("two key files hold one key")
	}
	if err := CreateMasterKeyFile(filepath.Join(t.TempDir(), "no", "such", "dir", "k")); err == nil {
		t.Fatal("created a key in a missing directory")
	}
}

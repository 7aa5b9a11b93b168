package seal

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/vcon-server/vcon-server/internal/durable"
)

const (
	// KeySize is the length of data keys and of the master key: AES-256.
	KeySize = 32
	// WrappedSize is the length of a wrapped data key (format byte, nonce,
	// ciphertext and tag), as stored in a version's catalog row.
	WrappedSize = 1 + 12 + KeySize + 16
	// CheckSize is the length of a master key's check value.
	CheckSize = 16

	wrapFormat = 1
	wrapLabel  = "vcon-server wrapped data key v1"
	checkLabel = "vcon-server master key check v1"
)

// DataKey seals one version, and only one (see NewWriter). It prints as a
// placeholder so that a stray %v never puts key bytes in a log.
type DataKey [KeySize]byte

// NewDataKey returns a fresh random data key.
func NewDataKey() (DataKey, error) {
	var dk DataKey
	if _, err := rand.Read(dk[:]); err != nil {
		return DataKey{}, fmt.Errorf("seal: new data key: %w", err)
	}
	return dk, nil
}

// Format prints a placeholder, never the key, whatever the verb.
func (DataKey) Format(f fmt.State, _ rune) { io.WriteString(f, "seal.DataKey(redacted)") }

// MasterKey wraps and unwraps tenant keys, and the secrets and keys of
// the catalog itself. It holds only the expanded cipher and the check
// value, and prints as a placeholder. Replace turns every holder of it to
// another key at once: a rotation taken while the server serves.
type MasterKey struct {
	st atomic.Pointer[masterState]
}

type masterState struct {
	aead  cipher.AEAD
	check [CheckSize]byte
}

func (m *MasterKey) state() *masterState { return m.st.Load() }

// Replace makes m the key next is, for every later call through m (the
// archive, the replica, the webhook sender all hold m).
func (m *MasterKey) Replace(next *MasterKey) { m.st.Store(next.state()) }

// Format prints a placeholder, never the key, whatever the verb.
func (*MasterKey) Format(f fmt.State, _ rune) { io.WriteString(f, "seal.MasterKey(redacted)") }

// MasterKeyFromBytes makes a master key from its 32 raw bytes (for tests and
// for rotation, which loads the new key before re-wrapping every data key).
func MasterKeyFromBytes(b []byte) (*MasterKey, error) {
	aead, err := newAEAD("master key", b)
	if err != nil {
		return nil, err
	}
	st := &masterState{aead: aead}
	mac := hmac.New(sha256.New, b)
	mac.Write([]byte(checkLabel))
	copy(st.check[:], mac.Sum(nil))
	m := &MasterKey{}
	m.st.Store(st)
	return m, nil
}

// newAEAD is AES-256-GCM under the 32 bytes of what (in errors).
func newAEAD(what string, b []byte) (cipher.AEAD, error) {
	if len(b) != KeySize {
		return nil, fmt.Errorf("seal: a %s must be %d bytes, got %d", what, KeySize, len(b))
	}
	block, err := aes.NewCipher(b)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return aead, nil
}

// CreateMasterKeyFile writes a new master key, 32 random raw bytes, to path
// with mode 0400. It never overwrites: an existing file may be the only key
// that opens a catalog's data, so the error then wraps fs.ErrExist. The key
// is written under a temporary name, synced, linked under path and its
// directory synced before it returns (internal/durable), so a key that was
// reported made survives a crash, and a crash never leaves a partial key
// under path for the next attempt to refuse.
func CreateMasterKeyFile(path string) error {
	var key [KeySize]byte
	if _, err := rand.Read(key[:]); err != nil {
		return fmt.Errorf("seal: create master key file: %w", err)
	}
	if err := durable.WriteNew(path, key[:], 0o400); err != nil {
		return fmt.Errorf("seal: create master key file %s: %w", path, err)
	}
	return nil
}

// LoadMasterKey reads the master key file at path: 32 raw bytes, or their
// base64 (standard or URL alphabet, padded or not) with optional trailing
// white space. It refuses a file that group or others may read, write or
// execute, since anyone who reads it can open every stored version.
func LoadMasterKey(path string) (*MasterKey, error) {
	key, err := ReadMasterKeyFile(path)
	if err != nil {
		return nil, err
	}
	defer clear(key)
	return MasterKeyFromBytes(key)
}

// ReadMasterKeyFile returns the raw key bytes of the master key file at
// path, with LoadMasterKey's checks; for a key about to be wrapped by a
// KMS (internal/masterkey), which needs the bytes themselves.
func ReadMasterKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("seal: open master key file: %w", err)
	}
	defer f.Close()
	// Stat the open file, not the path, so the mode checked is the mode of
	// the bytes read.
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("seal: stat master key file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("seal: master key file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		what := "readable"
		if perm&0o044 == 0 {
			what = "writable or executable"
		}
		return nil, fmt.Errorf("seal: master key file %s is %s by group or others (mode %04o); run: chmod 0400 %s",
			path, what, perm, path)
	}
	// Anything longer than a base64 key with some white space is wrong;
	// reading a little more than that is enough to say so.
	data, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return nil, fmt.Errorf("seal: read master key file %s: %w", path, err)
	}
	key, ok := parseKey(data)
	if !ok {
		return nil, fmt.Errorf("seal: master key file %s must hold %d bytes, raw or base64", path, KeySize)
	}
	return key, nil
}

func parseKey(data []byte) ([]byte, bool) {
	if len(data) == KeySize {
		return data, true // raw; base64 of 32 bytes is 43 or 44 characters
	}
	text := bytes.TrimRight(data, " \t\r\n")
	for _, enc := range []*base64.Encoding{
		base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding,
	} {
		key := make([]byte, enc.DecodedLen(len(text)))
		n, err := enc.Strict().Decode(key, text)
		if err == nil && n == KeySize {
			return key[:n], true
		}
	}
	return nil, false
}

// CheckValue returns the key's 16-byte check value (see the package
// comment), stored in the catalog so that a server started with another
// master key refuses at once instead of failing on every read. It is an
// HMAC output, so it reveals nothing of the key.
func (m *MasterKey) CheckValue() []byte {
	c := m.state().check
	return c[:]
}

// Wrap encrypts dk under the master key for the catalog row of (tenant,
// version). The ids are bound in as associated data, so the result unwraps
// only for that row. Each call uses a fresh random nonce.
func (m *MasterKey) Wrap(dk DataKey, tenant, version [16]byte) ([]byte, error) {
	ad := wrapAD(tenant, version)
	return box(m.state().aead, wrapFormat, ad[:], dk[:])
}

// Unwrap recovers the data key that Wrap wrapped for (tenant, version). Any
// failure (wrong master key, other ids, altered or cut bytes, unknown
// format) is an error wrapping ErrDamaged.
func (m *MasterKey) Unwrap(wrapped []byte, tenant, version [16]byte) (DataKey, error) {
	if len(wrapped) != WrappedSize {
		return DataKey{}, damaged("wrapped data key is %d bytes, not %d", len(wrapped), WrappedSize)
	}
	if wrapped[0] != wrapFormat {
		return DataKey{}, damaged("wrapped data key of unknown format %d", wrapped[0])
	}
	ad := wrapAD(tenant, version)
	var dk DataKey
	if _, err := m.state().aead.Open(dk[:0], wrapped[1:13], wrapped[13:], ad[:]); err != nil {
		return DataKey{}, damaged("wrapped data key did not verify")
	}
	return dk, nil
}

func wrapAD(tenant, version [16]byte) [len(wrapLabel) + 32]byte {
	var ad [len(wrapLabel) + 32]byte
	n := copy(ad[:], wrapLabel)
	n += copy(ad[n:], tenant[:])
	copy(ad[n:], version[:])
	return ad
}

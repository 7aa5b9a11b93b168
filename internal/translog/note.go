package translog

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The C2SP signed-note and tlog-checkpoint formats (docs/audit-log.md):
// a checkpoint is the note text "<origin>\n<size>\n<base64 root>\n",
// signed with Ed25519 under a key named as the log's origin, so that one
// key signs every log, each under its own name.

// sigEd25519 is the signature type byte of Ed25519 (C2SP signed-note).
const sigEd25519 = 0x01

// KeyID is the 4-byte id of an Ed25519 key under name:
// SHA-256(name ‖ 0x0A ‖ 0x01 ‖ public key)[:4], big-endian.
func KeyID(name string, pub ed25519.PublicKey) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n', sigEd25519})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// VerifierKey is the vkey of pub under name:
// <name>+<hex key id>+<base64(0x01 ‖ public key)>.
func VerifierKey(name string, pub ed25519.PublicKey) string {
	var id [4]byte
	binary.BigEndian.PutUint32(id[:], KeyID(name, pub))
	return name + "+" + hex.EncodeToString(id[:]) + "+" + base64.StdEncoding.EncodeToString(append([]byte{sigEd25519}, pub...))
}

// Checkpoint is a log's signed tree head.
type Checkpoint struct {
	Origin string
	Size   uint64
	Root   Hash
}

// Text is the checkpoint's note text.
func (c Checkpoint) Text() string {
	return c.Origin + "\n" + strconv.FormatUint(c.Size, 10) + "\n" + c.Root.String() + "\n"
}

// CheckOrigin refuses an origin that C2SP forbids as a key name: empty,
// holding a space, a plus or a control character.
func CheckOrigin(origin string) error {
	if origin == "" || strings.ContainsFunc(origin, func(r rune) bool { return r <= ' ' || r == '+' || r == 0x7f || r == 0x85 || r == 0xa0 }) {
		return fmt.Errorf("translog: %q cannot name a log: an origin is non-empty, without spaces, plus signs or control characters", origin)
	}
	return nil
}

// Sign signs c with key under the name c.Origin: the signed note.
func Sign(c Checkpoint, key ed25519.PrivateKey) ([]byte, error) {
	if err := CheckOrigin(c.Origin); err != nil {
		return nil, err
	}
	text := c.Text()
	pub := key.Public().(ed25519.PublicKey)
	sig := make([]byte, 4, 4+ed25519.SignatureSize)
	binary.BigEndian.PutUint32(sig, KeyID(c.Origin, pub))
	sig = append(sig, ed25519.Sign(key, []byte(text))...)
	return []byte(text + "\n— " + c.Origin + " " + base64.StdEncoding.EncodeToString(sig) + "\n"), nil
}

// ErrNotSigned: a note that no signature of the log's key verifies.
var ErrNotSigned = errors.New("translog: no signature of the log's key verifies the checkpoint")

// Open parses a signed checkpoint of the log origin and checks the
// signature of pub under that name; signatures of other keys are ignored,
// as C2SP signed-note says.
func Open(note []byte, origin string, pub ed25519.PublicKey) (Checkpoint, error) {
	i := bytes.LastIndex(note, []byte("\n\n"))
	if i < 0 || !bytes.HasSuffix(note, []byte("\n")) {
		return Checkpoint{}, errors.New("translog: not a signed note: no blank line before the signatures, or no final newline")
	}
	text, sigs := note[:i+1], note[i+2:]
	c, err := ParseText(text)
	if err != nil {
		return Checkpoint{}, err
	}
	if c.Origin != origin {
		return Checkpoint{}, fmt.Errorf("translog: the checkpoint is of the log %q, not %q", c.Origin, origin)
	}
	id := KeyID(origin, pub)
	for _, line := range strings.Split(strings.TrimSuffix(string(sigs), "\n"), "\n") {
		rest, ok := strings.CutPrefix(line, "— ")
		name, b64, ok2 := strings.Cut(rest, " ")
		if !ok || !ok2 || name != origin {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(sig) < 4 || binary.BigEndian.Uint32(sig) != id {
			continue
		}
		if !ed25519.Verify(pub, text, sig[4:]) {
			return Checkpoint{}, fmt.Errorf("%w: the signature of key %08x does not verify", ErrNotSigned, id)
		}
		return c, nil
	}
	return Checkpoint{}, ErrNotSigned
}

// ParseText reads a checkpoint's note text: origin, size, root, and
// extension lines, which are ignored.
func ParseText(text []byte) (Checkpoint, error) {
	lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
	if len(lines) < 3 {
		return Checkpoint{}, errors.New("translog: a checkpoint has three lines at least: origin, size, root hash")
	}
	size, err := strconv.ParseUint(lines[1], 10, 64)
	if err != nil || (len(lines[1]) > 1 && lines[1][0] == '0') {
		return Checkpoint{}, fmt.Errorf("translog: the checkpoint's size %q is not a decimal number", lines[1])
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != HashSize {
		return Checkpoint{}, fmt.Errorf("translog: the checkpoint's root %q is not a base64 SHA-256 hash", lines[2])
	}
	return Checkpoint{Origin: lines[0], Size: size, Root: Hash(root)}, nil
}

// Proof is a C2SP tlog-proof@v1: the inclusion proof of the record at
// index in the tree of the signed checkpoint note.
func Proof(index uint64, path []Hash, note []byte) []byte {
	var b strings.Builder
	b.WriteString("c2sp.org/tlog-proof@v1\nindex " + strconv.FormatUint(index, 10) + "\n")
	for _, h := range path {
		b.WriteString(h.String() + "\n")
	}
	b.WriteString("\n")
	b.Write(note)
	return []byte(b.String())
}

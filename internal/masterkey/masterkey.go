// Package masterkey reads and writes the file master_key names. Without
// [kms] it holds the raw key (seal.LoadMasterKey reads it); with [kms] it
// holds only the key as the KMS wrapped it, and every process unwraps it
// with one KMS call at start and keeps it in memory (docs/keys.md).
//
// A wrapped file is text, one "name: value" line each after the first:
//
//	vcon-server wrapped master key v1
//	kms: vault transit key "vcon-server" at https://vault.example.com:8200
//	catalog: 0b9b6c1e-8a1f-4f55-9b7e-2f0c7a6d3e11
//	ciphertext: <base64 of what the KMS returned>
//
// The kms line is for the reader only: the configuration says which KMS
// unwraps. The ciphertext is bound to the catalog (the KMS's encryption
// context), so a key file put beside another catalog does not open.
package masterkey

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/vcon-server/vcon-server/internal/durable"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/kms"
	"github.com/vcon-server/vcon-server/internal/secretfile"
	"github.com/vcon-server/vcon-server/seal"
)

const header = "vcon-server wrapped master key v1"

// maxFile bounds what is read of a key file: a KMS ciphertext of 32 bytes
// is a few hundred bytes, AWS KMS's longest some 6 KiB of base64.
const maxFile = 16 << 10

// Context is what the master key's ciphertext is bound to at the KMS.
func Context(catalog ids.ID) kms.Context {
	return kms.Context{"purpose": "vcon-server master key", "catalog": catalog.String()}
}

// Wrapped is a wrapped key file's contents.
type Wrapped struct {
	KMS        string // who wrapped it, as kms.Wrapper's String said
	Catalog    ids.ID
	Ciphertext []byte
}

// readFile reads the key file at path once, with secretfile's checks, and
// says whether it holds a wrapped key.
func readFile(path string) (data []byte, wrapped bool, err error) {
	data, err = secretfile.Read(path, maxFile)
	if err != nil {
		return nil, false, fmt.Errorf("the master key file %s %w", path, err)
	}
	return data, bytes.HasPrefix(data, []byte(header+"\n")), nil
}

// Load returns the master key at path: the raw key when w is nil, else
// the key w unwraps. It refuses a raw file under a KMS and a wrapped one
// without, saying which step the operator missed.
func Load(ctx context.Context, path string, w kms.Wrapper) (*seal.MasterKey, Wrapped, error) {
	if w == nil {
		mk, err := seal.LoadMasterKey(path)
		if err != nil {
			if _, wrapped, _ := readFile(path); wrapped {
				return nil, Wrapped{}, fmt.Errorf("the master key file %s holds a key wrapped by a KMS, and the configuration has no [kms] table: add the [kms] table the key was wrapped with (docs/keys.md)", path)
			}
		}
		return mk, Wrapped{}, err
	}
	data, wrapped, err := readFile(path)
	if err != nil {
		return nil, Wrapped{}, err
	}
	switch {
	case !wrapped:
		return nil, Wrapped{}, fmt.Errorf("the master key file %s holds a raw key, and the configuration has a [kms] table: run vcon-server master-key wrap to move the key into %s, or remove [kms]", path, w)
	}
	f, err := parse(path, data)
	if err != nil {
		return nil, Wrapped{}, err
	}
	raw, err := w.Unwrap(ctx, f.Ciphertext, Context(f.Catalog))
	if err != nil {
		return nil, f, fmt.Errorf("the master key file %s does not open: %w", path, err)
	}
	mk, err := seal.MasterKeyFromBytes(raw)
	clear(raw)
	if err != nil {
		return nil, f, fmt.Errorf("the master key file %s: %s unwrapped %d bytes, not a master key", path, w, len(raw))
	}
	return mk, f, nil
}

// parse reads the four lines of a wrapped key file.
func parse(path string, data []byte) (Wrapped, error) {
	var err error
	bad := func(what string) (Wrapped, error) {
		return Wrapped{}, fmt.Errorf("the master key file %s is damaged: %s; restore it from where the key was kept", path, what)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 4 || lines[0] != header {
		return bad("it is not the four lines of a wrapped key")
	}
	var f Wrapped
	for i, name := range []string{"kms", "catalog", "ciphertext"} {
		v, ok := strings.CutPrefix(lines[i+1], name+": ")
		if !ok {
			return bad(fmt.Sprintf("line %d is not %q", i+2, name+": ..."))
		}
		switch name {
		case "kms":
			f.KMS = v
		case "catalog":
			if f.Catalog, err = ids.Parse(v); err != nil {
				return bad("its catalog line is not a catalog id")
			}
		case "ciphertext":
			if f.Ciphertext, err = base64.StdEncoding.Strict().DecodeString(v); err != nil || len(f.Ciphertext) == 0 {
				return bad("its ciphertext line is not base64")
			}
		}
	}
	return f, nil
}

// Create writes a new master key to path, never over an existing file
// (its error then wraps fs.ErrExist): the raw key when w is nil, else the
// key wrapped by w for catalog. The raw bytes of a wrapped key are never
// written anywhere.
func Create(ctx context.Context, path string, w kms.Wrapper, catalog ids.ID) error {
	if w == nil {
		return seal.CreateMasterKeyFile(path)
	}
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("the master key file %s: %w", path, fs.ErrExist)
	}
	var raw [seal.KeySize]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return err
	}
	defer clear(raw[:])
	return write(ctx, path, w, raw[:], catalog)
}

func write(ctx context.Context, path string, w kms.Wrapper, raw []byte, catalog ids.ID) error {
	ct, err := w.Wrap(ctx, raw, Context(catalog))
	if err != nil {
		return fmt.Errorf("wrap the master key: %w", err)
	}
	text := fmt.Sprintf("%s\nkms: %s\ncatalog: %s\nciphertext: %s\n", header, oneLine(w.String()), catalog, base64.StdEncoding.EncodeToString(ct))
	if err := durable.WriteNew(path, []byte(text), 0o400); err != nil {
		return fmt.Errorf("write the master key file %s: %w", path, err)
	}
	return nil
}

func oneLine(s string) string { return strings.NewReplacer("\n", " ", "\r", " ").Replace(s) }

// Wrap moves the raw key at path into the KMS: the wrapped form is
// written beside it, checked by unwrapping it again, and renamed over
// path; the raw key is kept at the returned path for the operator to
// destroy. Each step leaves path a key that opens the catalog, raw or
// wrapped, so a crash anywhere is finished by running Wrap again. check
// is the catalog's check value: a key that does not open the catalog is
// not wrapped.
func Wrap(ctx context.Context, path string, w kms.Wrapper, catalog ids.ID, check []byte) (rawCopy string, err error) {
	rawCopy = path + ".raw"
	if _, wrapped, err := readFile(path); err != nil {
		return "", err
	} else if wrapped {
		return "", fmt.Errorf("the master key file %s is wrapped already; nothing to do", path)
	}
	raw, err := seal.ReadMasterKeyFile(path)
	if err != nil {
		return "", err
	}
	defer clear(raw)
	mk, err := seal.MasterKeyFromBytes(raw)
	if err != nil {
		return "", err
	}
	if !bytes.Equal(mk.CheckValue(), check) {
		return "", fmt.Errorf("the master key %s does not open catalog %s, so it is not wrapped; set master_key to the key file of this catalog", path, catalog)
	}
	next := path + ".wrapped"
	if err := os.Remove(next); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := write(ctx, next, w, raw, catalog); err != nil {
		return "", err
	}
	if back, _, err := Load(ctx, next, w); err != nil {
		return "", fmt.Errorf("the key just wrapped does not unwrap again, so %s is left as it was: %w", path, err)
	} else if !bytes.Equal(back.CheckValue(), mk.CheckValue()) {
		return "", fmt.Errorf("%s unwrapped another key than it wrapped, so %s is left as it was", w, path)
	}
	if err := os.Link(path, rawCopy); errors.Is(err, fs.ErrExist) {
		// Left by a run cut before its rename, it must be this key.
		if kept, err := seal.ReadMasterKeyFile(rawCopy); err != nil || !bytes.Equal(kept, raw) {
			return "", fmt.Errorf("%s holds another key than %s; move it away, then run master-key wrap again", rawCopy, path)
		}
	} else if err != nil {
		return "", fmt.Errorf("keep the raw key at %s: %w", rawCopy, err)
	}
	if err := os.Rename(next, path); err != nil {
		return "", err
	}
	return rawCopy, durable.SyncDir(filepath.Dir(path))
}

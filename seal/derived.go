package seal

import (
	"crypto/hkdf"
	"crypto/sha256"
)

// Keys derived from the master key for one tenant, as IndexKey is: HKDF-
// SHA-256 with a label of their own before the tenant id, so that no two
// purposes share a key. A new master key gives new keys.
const (
	bodyMACLabel = "vcon-server body mac v1"
	secretLabel  = "vcon-server webhook secret v1"
)

func (m *MasterKey) derive(label string, tenant [16]byte) []byte {
	k, err := hkdf.Expand(sha256.New, m.index, label+string(tenant[:]), KeySize)
	if err != nil {
		panic("seal: hkdf: " + err.Error()) // only for lengths past 255*32
	}
	return k
}

// BodyMACKey is a tenant's key for the HMAC-SHA-256 of each stored body
// that a version's row keeps, so that a retried store is recognised
// without keeping anything clear (docs/api.md, "Retries").
func (m *MasterKey) BodyMACKey(tenant [16]byte) []byte { return m.derive(bodyMACLabel, tenant) }

// SealSecret encrypts a tenant's webhook secret for its catalog row:
// format byte, 12-byte random nonce, AES-256-GCM ciphertext and tag, with
// the label and the tenant id as associated data (a sealed secret copied
// to another tenant's row does not open).
func (m *MasterKey) SealSecret(tenant [16]byte, secret []byte) ([]byte, error) {
	return box(m.aead, wrapFormat, secretAD(tenant), secret)
}

// OpenSecret recovers what SealSecret sealed for tenant. Any failure (a
// rotated master key, another tenant's row, altered bytes) wraps
// ErrDamaged.
func (m *MasterKey) OpenSecret(tenant [16]byte, sealed []byte) ([]byte, error) {
	if len(sealed) < 1+12+16 || sealed[0] != wrapFormat {
		return nil, damaged("sealed secret of %d bytes is not of format %d", len(sealed), wrapFormat)
	}
	out, err := m.aead.Open(nil, sealed[1:13], sealed[13:], secretAD(tenant))
	if err != nil {
		return nil, damaged("sealed secret did not verify")
	}
	return out, nil
}

func secretAD(tenant [16]byte) []byte { return append([]byte(secretLabel), tenant[:]...) }

package seal

const secretLabel = "vcon-server webhook secret v1"

// SealSecret encrypts a tenant's webhook secret for its catalog row:
// format byte, 12-byte random nonce, AES-256-GCM ciphertext and tag, with
// the label and the tenant id as associated data (a sealed secret copied
// to another tenant's row does not open).
func (m *MasterKey) SealSecret(tenant [16]byte, secret []byte) ([]byte, error) {
	return box(m.state().aead, wrapFormat, secretAD(tenant), secret)
}

// OpenSecret recovers what SealSecret sealed for tenant. Any failure (a
// rotated master key, another tenant's row, altered bytes) wraps
// ErrDamaged.
func (m *MasterKey) OpenSecret(tenant [16]byte, sealed []byte) ([]byte, error) {
	if len(sealed) < 1+12+16 || sealed[0] != wrapFormat {
		return nil, damaged("sealed secret of %d bytes is not of format %d", len(sealed), wrapFormat)
	}
	out, err := m.state().aead.Open(nil, sealed[1:13], sealed[13:], secretAD(tenant))
	if err != nil {
		return nil, damaged("sealed secret did not verify")
	}
	return out, nil
}

func secretAD(tenant [16]byte) []byte { return append([]byte(secretLabel), tenant[:]...) }

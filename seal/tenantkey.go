package seal

import (
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
)

// A tenant's key sits between the master key and the tenant's data keys
// (docs/FORMAT.md, "Keys"): the master key (or a KMS key of the tenant's
// own) wraps it, it wraps the tenant's data keys, and the keys of its
// search index and of its retry hashes derive from it. A master-key
// rotation then re-wraps one key per tenant, and destroying a tenant's
// key shreds everything of the tenant at once.
const (
	// tenantWrapFormat marks a data key wrapped under its tenant's key; a
	// data key of format wrapFormat is still under the master key (a
	// catalog made before tenant keys, until its move finishes).
	tenantWrapFormat = 2

	tenantKeyLabel   = "vcon-server tenant key v1"
	bodyMACLabel     = "vcon-server body mac v1"
	indexLabel       = "vcon-server search index v1"
	tenantDataLabel  = "vcon-server tenant data key v1"
	tenantCheckLabel = "vcon-server tenant key check v1"
)

// TenantKey is one tenant's key, unwrapped: only ever in memory. It prints
// as a placeholder.
type TenantKey struct {
	tenant [16]byte
	aead   cipher.AEAD
	prk    []byte // HKDF pseudorandom key of the derived keys
	check  [CheckSize]byte
}

// Format prints a placeholder, never the key, whatever the verb.
func (*TenantKey) Format(f fmt.State, _ rune) { io.WriteString(f, "seal.TenantKey(redacted)") }

// NewTenantKeyBytes returns the 32 random bytes of a new tenant key: the
// caller wraps them (MasterKey.WrapTenantKey, or a KMS) and clears them.
func NewTenantKeyBytes() ([]byte, error) {
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("seal: new tenant key: %w", err)
	}
	return b, nil
}

// TenantKeyFromBytes makes tenant's key from its 32 raw bytes.
func TenantKeyFromBytes(tenant [16]byte, b []byte) (*TenantKey, error) {
	aead, err := newAEAD("tenant key", b)
	if err != nil {
		return nil, err
	}
	k := &TenantKey{tenant: tenant, aead: aead}
	if k.prk, err = hkdf.Extract(sha256.New, b, []byte(tenantKeyLabel)); err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	mac := hmac.New(sha256.New, b)
	mac.Write([]byte(tenantCheckLabel))
	mac.Write(tenant[:])
	copy(k.check[:], mac.Sum(nil))
	return k, nil
}

// Tenant is the id of the tenant the key belongs to.
func (k *TenantKey) Tenant() [16]byte { return k.tenant }

// CheckValue is the key's check value: an HMAC, revealing nothing of the
// key, by which a search index records the key it was built under.
func (k *TenantKey) CheckValue() []byte {
	c := k.check
	return c[:]
}

// Wrap encrypts dk for the catalog row of one of the tenant's versions,
// bound to the tenant and the version as MasterKey.Wrap binds them; the
// result is WrappedSize bytes whose first says it is under a tenant key.
func (k *TenantKey) Wrap(dk DataKey, version [16]byte) ([]byte, error) {
	ad := tenantDataAD(k.tenant, version)
	return box(k.aead, tenantWrapFormat, ad[:], dk[:])
}

// Unwrap recovers the data key Wrap wrapped for version. Any failure wraps
// ErrDamaged.
func (k *TenantKey) Unwrap(wrapped []byte, version [16]byte) (DataKey, error) {
	if len(wrapped) != WrappedSize {
		return DataKey{}, damaged("wrapped data key is %d bytes, not %d", len(wrapped), WrappedSize)
	}
	ad := tenantDataAD(k.tenant, version)
	var dk DataKey
	if err := unbox(k.aead, tenantWrapFormat, ad[:], wrapped, dk[:0]); err != nil {
		return DataKey{}, damaged("wrapped data key: %v", err)
	}
	return dk, nil
}

// UnderTenantKey tells whether a version's wrapped data key is under its
// tenant's key (else it is under the master key: a row not yet moved).
func UnderTenantKey(wrapped []byte) bool { return len(wrapped) > 0 && wrapped[0] == tenantWrapFormat }

// IndexKey is the key of the tenant's blind search index.
func (k *TenantKey) IndexKey() []byte { return k.derive(indexLabel) }

// BodyMACKey is the key of the HMAC-SHA-256 each version's row keeps of
// its body, so that a retried store is recognised (docs/api.md, "Retries").
func (k *TenantKey) BodyMACKey() []byte { return k.derive(bodyMACLabel) }

func (k *TenantKey) derive(label string) []byte {
	b, err := hkdf.Expand(sha256.New, k.prk, label, KeySize)
	if err != nil {
		panic("seal: hkdf: " + err.Error()) // only for lengths past 255*32
	}
	return b
}

// WrapTenantKey encrypts the raw bytes of tenant's key under the master
// key for the tenant's row of tenant_keys; it opens only for that tenant.
func (m *MasterKey) WrapTenantKey(tenant [16]byte, raw []byte) ([]byte, error) {
	if len(raw) != KeySize {
		return nil, fmt.Errorf("seal: a tenant key must be %d bytes, got %d", KeySize, len(raw))
	}
	return box(m.state().aead, wrapFormat, tenantKeyAD(tenant), raw)
}

// UnwrapTenantKey recovers what WrapTenantKey wrapped for tenant. Any
// failure (another master key, another tenant's row, altered bytes) wraps
// ErrDamaged.
func (m *MasterKey) UnwrapTenantKey(tenant [16]byte, wrapped []byte) ([]byte, error) {
	if len(wrapped) != WrappedSize {
		return nil, damaged("wrapped tenant key is %d bytes, not %d", len(wrapped), WrappedSize)
	}
	raw := make([]byte, 0, KeySize)
	if err := unbox(m.state().aead, wrapFormat, tenantKeyAD(tenant), wrapped, raw); err != nil {
		return nil, damaged("wrapped tenant key: %v", err)
	}
	return raw[:KeySize], nil
}

func tenantKeyAD(tenant [16]byte) []byte { return append([]byte(tenantKeyLabel), tenant[:]...) }

func tenantDataAD(tenant, version [16]byte) [len(tenantDataLabel) + 32]byte {
	var ad [len(tenantDataLabel) + 32]byte
	n := copy(ad[:], tenantDataLabel)
	n += copy(ad[n:], tenant[:])
	copy(ad[n:], version[:])
	return ad
}

// box seals plain under aead as a format byte, a fresh 12-byte nonce, the
// ciphertext and its tag.
func box(aead cipher.AEAD, format byte, ad, plain []byte) ([]byte, error) {
	out := make([]byte, 1+12, 1+12+len(plain)+16)
	out[0] = format
	if _, err := rand.Read(out[1:13]); err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return aead.Seal(out, out[1:13], plain, ad), nil
}

// unbox opens what box sealed in format, appending the plain bytes to dst
// (whose capacity must hold them, so that they land in the caller's
// array).
func unbox(aead cipher.AEAD, format byte, ad, boxed, dst []byte) error {
	if len(boxed) < 1+12+16 || boxed[0] != format {
		return fmt.Errorf("not of format %d", format)
	}
	if _, err := aead.Open(dst, boxed[1:13], boxed[13:], ad); err != nil {
		return fmt.Errorf("did not verify")
	}
	return nil
}

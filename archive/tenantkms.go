package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/kms"
	"github.com/vcon-server/vcon-server/seal"
)

// SetTenantKMSKey wraps tenant's key anew (docs/keys.md, "A tenant's own
// key"): by its own KMS key kmsKey, or under the master key when kmsKey is
// empty, even by the key that wraps it now (a fresh wrapping, recorded as
// any other). The key stays the same, so nothing else changes: no data key, no
// index. The new wrapping is unwrapped again before it is written, so a
// key the server may encrypt with but not decrypt with is refused while
// the old wrapping still holds. A running server takes it within its
// key cache (kms.key_cache). It needs the Archive's master key and, for a
// KMS key, its KeyServices; the key is on the service of the tenant's
// [kms.tenant.NAME] table if it has one.
func (a *Archive) SetTenantKMSKey(ctx context.Context, tenant ids.ID, kmsKey string, by catalog.Actor) error {
	t, err := a.Cat.Tenant(ctx, tenant)
	if err != nil {
		return err
	}
	service := ""
	if kmsKey != "" && a.KeyServices != nil {
		service = a.KeyServices.ServiceOf(t.Name)
	}
	row, err := a.Cat.TenantKey(ctx, tenant)
	if errors.Is(err, catalog.ErrNotFound) {
		row, err = makeTenantKey(ctx, a.Cat, a.Key, tenant)
	}
	if err != nil {
		return err
	}
	_, raw, err := a.unwrapRow(ctx, row)
	if err != nil {
		return err
	}
	defer clear(raw)
	var wrapped []byte
	if kmsKey == "" {
		wrapped, err = a.Key.WrapTenantKey(tenant, raw)
	} else {
		wrapped, err = a.wrapOwn(ctx, tenant, service, kmsKey, raw)
	}
	if err != nil {
		return err
	}
	next := catalog.TenantKey{Tenant: tenant, Wrapped: wrapped, Check: row.Check, KMSKey: kmsKey, KMSService: service}
	if kmsKey == "" {
		next.MasterCheck = a.Key.CheckValue()
	}
	if _, again, err := a.unwrapRow(ctx, next); err != nil {
		return fmt.Errorf("the key wrapped by %q does not unwrap again, so the tenant's key stays as it was: %w", kmsKey, err)
	} else {
		clear(again)
	}
	if err := a.Cat.SetTenantKeyWrap(ctx, tenant, row.Wrapped, next, by); err != nil {
		return err
	}
	a.tkeys.forget(tenant)
	return nil
}

func (a *Archive) wrapOwn(ctx context.Context, tenant ids.ID, service, kmsKey string, raw []byte) ([]byte, error) {
	w, err := a.tenantWrapper(service, kmsKey)
	if err != nil {
		return nil, err
	}
	wrapped, err := w.Wrap(ctx, raw, TenantKeyContext(a.Cat.ID, tenant))
	if err != nil {
		return nil, &TenantKeyError{Key: kmsKey, Err: err}
	}
	return wrapped, nil
}

// unwrapRow unwraps row, under the master key or the tenant's own KMS key,
// and checks it against the row's check value. The caller clears raw.
func (a *Archive) unwrapRow(ctx context.Context, row catalog.TenantKey) (k *seal.TenantKey, raw []byte, err error) {
	if row.KMSKey == "" {
		if raw, err = a.Key.UnwrapTenantKey(row.Tenant, row.Wrapped); err != nil {
			if a.keyRotated(ctx) {
				return nil, nil, catalog.ErrKeyRotated
			}
			return nil, nil, errors.Join(ErrDamaged, fmt.Errorf("a tenant's key does not open: %w", err))
		}
	} else {
		w, err := a.tenantWrapper(row.KMSService, row.KMSKey)
		if err != nil {
			return nil, nil, err
		}
		if raw, err = w.Unwrap(ctx, row.Wrapped, TenantKeyContext(a.Cat.ID, row.Tenant)); err != nil {
			return nil, nil, &TenantKeyError{Key: row.KMSKey, Err: err}
		}
	}
	k, err = seal.TenantKeyFromBytes(row.Tenant, raw)
	if err != nil || !bytes.Equal(k.CheckValue(), row.Check) {
		clear(raw)
		return nil, nil, errors.Join(ErrDamaged, errors.New("a tenant's key does not match the check value of its row"))
	}
	return k, raw, nil
}

// keyRotated tells whether the catalog names another master key than the
// Archive's: a rotation committed since, which the server takes within a
// second (docs/keys.md).
func (a *Archive) keyRotated(ctx context.Context) bool {
	check, _, err := a.Cat.KeyCheck(ctx)
	return err == nil && !bytes.Equal(check, a.Key.CheckValue())
}

// TenantKeyState is what tenant show says of a tenant's key.
type TenantKeyState struct {
	WrappedBy string `json:"wrapped_by"`        // "master key" or "kms"
	KMSKey    string `json:"kms_key,omitempty"` // the tenant's own key
	// State is "opens", "refused" (its own key refuses), "unreachable"
	// (its own key cannot be reached) or "damaged"; empty when not tried.
	State string `json:"state,omitempty"`
	Error string `json:"error,omitempty"` // why it did not open
}

// KeyState tries tenant's key as a request would, asking its own KMS key
// afresh (never the cache). An Archive without its master key (the CLI's
// tenant show) tries only a key of the tenant's own.
func (a *Archive) KeyState(ctx context.Context, tenant ids.ID) (TenantKeyState, error) {
	st := TenantKeyState{WrappedBy: "master key"}
	row, err := a.Cat.TenantKey(ctx, tenant)
	if errors.Is(err, catalog.ErrNotFound) {
		return st, nil // made at its first use
	}
	if err != nil {
		return st, err
	}
	if row.KMSKey != "" {
		st.WrappedBy, st.KMSKey = "kms", row.KMSKey
	} else if a.Key == nil {
		return st, nil
	}
	_, raw, err := a.unwrapRow(ctx, row)
	clear(raw)
	switch {
	case err == nil:
		st.State = "opens"
	case errors.Is(err, kms.ErrRefused):
		st.State = "refused"
	case errors.Is(err, kms.ErrUnreachable):
		st.State = "unreachable"
	default:
		st.State = "damaged"
	}
	if err != nil {
		st.Error = err.Error()
	}
	return st, nil
}

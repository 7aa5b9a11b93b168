package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/seal"
)

// Each tenant has a key of its own (docs/FORMAT.md, "Keys"): its row in
// tenant_keys holds it wrapped, and a process unwraps it once, at its first
// use, and keeps it in memory only.

// tenantKeys are the tenant keys a process has unwrapped.
type tenantKeys struct {
	mu   sync.Mutex
	keys map[ids.ID]*seal.TenantKey
}

func (t *tenantKeys) get(tenant ids.ID) *seal.TenantKey {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.keys[tenant]
}

func (t *tenantKeys) put(k *seal.TenantKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.keys == nil {
		t.keys = map[ids.ID]*seal.TenantKey{}
	}
	t.keys[k.Tenant()] = k
}

// TenantKey returns tenant's key, making it when the tenant has none yet
// (a tenant made since, or one of a catalog made before tenant keys).
func (a *Archive) TenantKey(ctx context.Context, tenant ids.ID) (*seal.TenantKey, error) {
	if k := a.tkeys.get(tenant); k != nil {
		return k, nil
	}
	k, err := openTenantKey(ctx, a.Cat, a.Key, tenant)
	if err != nil {
		return nil, err
	}
	a.tkeys.put(k)
	return k, nil
}

// openTenantKey reads and unwraps tenant's key, made first if it has none.
func openTenantKey(ctx context.Context, cat *catalog.Catalog, mk *seal.MasterKey, tenant ids.ID) (*seal.TenantKey, error) {
	row, err := cat.TenantKey(ctx, tenant)
	if errors.Is(err, catalog.ErrNotFound) {
		row, err = makeTenantKey(ctx, cat, mk, tenant)
	}
	if err != nil {
		return nil, err
	}
	raw, err := mk.UnwrapTenantKey(tenant, row.Wrapped)
	if err != nil {
		return nil, errors.Join(ErrDamaged, fmt.Errorf("a tenant's key does not open with the master key: %w", err))
	}
	defer clear(raw)
	k, err := seal.TenantKeyFromBytes(tenant, raw)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(k.CheckValue(), row.Check) {
		return nil, errors.Join(ErrDamaged, errors.New("a tenant's key does not match the check value of its row"))
	}
	return k, nil
}

// makeTenantKey makes a new key for tenant, wrapped under the master key,
// and records it, unless another process recorded one first: the row
// returned is the one that holds.
func makeTenantKey(ctx context.Context, cat *catalog.Catalog, mk *seal.MasterKey, tenant ids.ID) (catalog.TenantKey, error) {
	k, err := NewTenantKey(mk)(tenant)
	if err != nil {
		return catalog.TenantKey{}, err
	}
	return cat.AddTenantKey(ctx, k)
}

// NewTenantKey makes the row of a new tenant key wrapped under mk, for
// catalog.Catalog.NewTenantKeyed: a tenant made by an operator has its
// key from the start, so that its first store writes nothing more.
func NewTenantKey(mk *seal.MasterKey) func(tenant ids.ID) (catalog.TenantKey, error) {
	return func(tenant ids.ID) (catalog.TenantKey, error) {
		raw, err := seal.NewTenantKeyBytes()
		if err != nil {
			return catalog.TenantKey{}, err
		}
		defer clear(raw)
		k, err := seal.TenantKeyFromBytes(tenant, raw)
		if err != nil {
			return catalog.TenantKey{}, err
		}
		wrapped, err := mk.WrapTenantKey(tenant, raw)
		if err != nil {
			return catalog.TenantKey{}, err
		}
		return catalog.TenantKey{Tenant: tenant, Wrapped: wrapped, Check: k.CheckValue()}, nil
	}
}

// dataKey unwraps the data key of v: under its tenant's key, or under the
// master key for a version of a catalog made before tenant keys whose move
// has not reached it.
func (a *Archive) dataKey(ctx context.Context, v catalog.Version) (seal.DataKey, error) {
	if v.WrappedKey == nil {
		return seal.DataKey{}, ErrNotFound
	}
	var dk seal.DataKey
	var err error
	if seal.UnderTenantKey(v.WrappedKey) {
		var tk *seal.TenantKey
		if tk, err = a.TenantKey(ctx, v.Tenant); err != nil {
			return seal.DataKey{}, err
		}
		dk, err = tk.Unwrap(v.WrappedKey, v.ID)
	} else {
		dk, err = a.Key.Unwrap(v.WrappedKey, v.Tenant, v.ID)
	}
	if err != nil {
		return seal.DataKey{}, errors.Join(ErrDamaged, err)
	}
	return dk, nil
}

// forget drops tenant's key from this process's memory, once its row is
// deleted (a tenant's delete, tenantdelete.go): nothing of it opens here
// after, as nowhere else.
func (t *tenantKeys) forget(tenant ids.ID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.keys, tenant)
}

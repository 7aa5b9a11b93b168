package archive

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/kms"
	"github.com/vcon-server/vcon-server/seal"
)

// Each tenant has a key of its own (docs/FORMAT.md, "Tenant keys"): its
// row in tenant_keys holds it wrapped, under the master key or under a KMS
// key of the tenant's own (docs/keys.md), and a process unwraps it at its
// first use and keeps it in memory only, for KeyCache: a revocation, or a
// change another process made, takes effect within it. A refusal is never
// kept: the next request asks again.

// tenantKeys are the tenant keys a process has unwrapped, and the
// unwrappings under way: one per tenant, which its other requests wait
// for, while every other tenant goes on.
type tenantKeys struct {
	mu       sync.Mutex
	keys     map[ids.ID]cachedKey
	flights  map[ids.ID]*keyFlight
	failing  map[ids.ID]bool // tenants whose own key did not open at the last try
	wrappers map[string]kms.Wrapper
}

type cachedKey struct {
	key   *seal.TenantKey
	until time.Time
}

type keyFlight struct {
	done chan struct{}
	key  cachedKey
	err  error
}

// TenantKeyError is a tenant key that its tenant's own KMS key did not
// unwrap: errors.Is(err, kms.ErrRefused) once the KMS refuses (the key
// disabled, deleted or its grant removed), kms.ErrUnreachable while it
// cannot be reached. Its text names the tenant's key, never the tenant.
type TenantKeyError struct {
	Key string // the tenant's KMS key, as tenant set-key named it
	Err error
}

func (e *TenantKeyError) Error() string {
	if errors.Is(e.Err, kms.ErrUnreachable) {
		return fmt.Sprintf("this tenant's own key %q cannot be reached to open the tenant's data, so nothing was done; retry later; the key service said: %v", e.Key, e.Err)
	}
	return fmt.Sprintf("this tenant's own key %q refused to open the tenant's data, so nothing was done; the tenant must grant the server its use again (docs/keys.md); the key service said: %v", e.Key, e.Err)
}

func (e *TenantKeyError) Unwrap() error { return e.Err }

// TenantKeyContext is what a tenant key wrapped by a KMS key is bound to.
func TenantKeyContext(catalogID, tenant ids.ID) kms.Context {
	return kms.Context{"purpose": "vcon-server tenant key", "catalog": catalogID.String(), "tenant": tenant.String()}
}

// TenantKey returns tenant's key, making it when the tenant has none yet
// (a tenant made by an older release, or by a test through the catalog).
func (a *Archive) TenantKey(ctx context.Context, tenant ids.ID) (*seal.TenantKey, error) {
	t := &a.tkeys
	t.mu.Lock()
	if c, ok := t.keys[tenant]; ok && time.Now().Before(c.until) {
		t.mu.Unlock()
		return c.key, nil
	}
	f := t.flights[tenant]
	if f == nil {
		f = &keyFlight{done: make(chan struct{})}
		if t.flights == nil {
			t.flights = map[ids.ID]*keyFlight{}
		}
		t.flights[tenant] = f
		t.mu.Unlock()
		// The unwrapping outlives a request that gives up: the others
		// waiting for it still want its answer. kms.Timeout bounds it.
		f.key, f.err = a.unwrapTenantKey(context.WithoutCancel(ctx), tenant)
		t.mu.Lock()
		delete(t.flights, tenant)
		var own *TenantKeyError
		if t.failing == nil {
			t.failing = map[ids.ID]bool{}
		}
		if errors.As(f.err, &own) {
			t.failing[tenant] = true
		} else {
			delete(t.failing, tenant)
		}
		if f.err == nil {
			if t.keys == nil {
				t.keys = map[ids.ID]cachedKey{}
			}
			t.keys[tenant] = f.key
		}
		t.mu.Unlock()
		close(f.done)
	} else {
		t.mu.Unlock()
	}
	select {
	case <-f.done:
		return f.key.key, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// forget drops tenant's key from this process's memory: its row changed
// (tenant set-key) or is deleted (a tenant's delete, tenantdelete.go), so
// that the next use reads it again, or finds nothing.
func (t *tenantKeys) forget(tenant ids.ID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.keys, tenant)
	delete(t.failing, tenant)
}

// TenantKeysFailing counts the tenants whose own key did not open at the
// last try (the server's metrics; never which).
func (a *Archive) TenantKeysFailing() int {
	a.tkeys.mu.Lock()
	defer a.tkeys.mu.Unlock()
	return len(a.tkeys.failing)
}

// unwrapTenantKey reads and unwraps tenant's key, made first if it has
// none. Every key is read again after KeyCache, so that a key set or
// destroyed by another process (tenant set-key, tenant delete) takes
// effect within it.
func (a *Archive) unwrapTenantKey(ctx context.Context, tenant ids.ID) (cachedKey, error) {
	row, err := a.Cat.TenantKey(ctx, tenant)
	if errors.Is(err, catalog.ErrNotFound) {
		row, err = makeTenantKey(ctx, a.Cat, a.Key, tenant)
	}
	if err != nil {
		return cachedKey{}, err
	}
	k, raw, err := a.unwrapRow(ctx, row)
	clear(raw)
	return cachedKey{key: k, until: time.Now().Add(a.keyCache())}, err
}

func (a *Archive) keyCache() time.Duration {
	if a.KeyCache > 0 {
		return a.KeyCache
	}
	return 300 * time.Second
}

// tenantWrapper is the Wrapper of a tenant's own KMS key on service, made
// once.
func (a *Archive) tenantWrapper(service, key string) (kms.Wrapper, error) {
	if a.KeyServices == nil {
		return nil, fmt.Errorf("a tenant's key is wrapped by its own KMS key %q, and the configuration has no [kms] table to reach it; restore the [kms] table (docs/keys.md)", key)
	}
	a.tkeys.mu.Lock()
	defer a.tkeys.mu.Unlock()
	name := service + "\x00" + key
	if w := a.tkeys.wrappers[name]; w != nil {
		return w, nil
	}
	w, err := a.KeyServices.Key(service, key)
	if err != nil {
		return nil, err
	}
	if a.tkeys.wrappers == nil {
		a.tkeys.wrappers = map[string]kms.Wrapper{}
	}
	a.tkeys.wrappers[name] = w
	return w, nil
}

// openTenantKey reads and unwraps tenant's key under the master key, made
// first if it has none: the move, which runs before a tenant can have a
// key of its own.
func openTenantKey(ctx context.Context, cat *catalog.Catalog, mk *seal.MasterKey, tenant ids.ID) (*seal.TenantKey, error) {
	row, err := cat.TenantKey(ctx, tenant)
	if errors.Is(err, catalog.ErrNotFound) {
		row, err = makeTenantKey(ctx, cat, mk, tenant)
	}
	if err != nil {
		return nil, err
	}
	a := &Archive{Config: Config{Cat: cat, Key: mk}}
	k, raw, err := a.unwrapRow(ctx, row)
	clear(raw)
	return k, err
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

// NewTenantKey makes the row of a new tenant key wrapped under mk.
func NewTenantKey(mk *seal.MasterKey) func(tenant ids.ID) (catalog.TenantKey, error) {
	return func(tenant ids.ID) (catalog.TenantKey, error) {
		k, err := newTenantKey(tenant, func(raw []byte) ([]byte, string, error) {
			w, err := mk.WrapTenantKey(tenant, raw)
			return w, "", err
		})
		k.MasterCheck = mk.CheckValue()
		return k, err
	}
}

// newTenantKey makes a key for tenant and its row, wrapped by wrap, which
// also names the KMS key that wraps it ("" for the master key).
func newTenantKey(tenant ids.ID, wrap func(raw []byte) ([]byte, string, error)) (catalog.TenantKey, error) {
	raw, err := seal.NewTenantKeyBytes()
	if err != nil {
		return catalog.TenantKey{}, err
	}
	defer clear(raw)
	k, err := seal.TenantKeyFromBytes(tenant, raw)
	if err != nil {
		return catalog.TenantKey{}, err
	}
	wrapped, kmsKey, err := wrap(raw)
	if err != nil {
		return catalog.TenantKey{}, err
	}
	return catalog.TenantKey{Tenant: tenant, Wrapped: wrapped, Check: k.CheckValue(), KMSKey: kmsKey}, nil
}

// NewTenant creates a tenant with its key (docs/keys.md): with
// KMSTenantKeys, under a key made for it in the key service, which a tenant delete
// deletes; else under the master key. The key service is asked before the
// catalog's transaction, never inside it; a key made for a tenant that
// is then refused (its name taken) is deleted again.
func (a *Archive) NewTenant(ctx context.Context, name string, by catalog.Actor) (catalog.Tenant, error) {
	id := ids.NewRandom()
	if !a.KMSTenantKeys || a.KeyServices == nil {
		k, err := NewTenantKey(a.Key)(id)
		if err != nil {
			return catalog.Tenant{}, err
		}
		return a.Cat.NewTenantKeyed(ctx, name, by, k)
	}
	service := a.KeyServices.ServiceOf(name)
	admin, err := a.KeyServices.Admin(service)
	if err != nil {
		return catalog.Tenant{}, err
	}
	key, err := admin.NewKey(ctx, "vcon-server-tenant-"+id.String())
	if err != nil {
		return catalog.Tenant{}, fmt.Errorf("the key service did not make the new tenant's key, so no tenant was made: %w; grant the credentials of [kms] the making of keys, or set kms.tenant_keys = \"master\" (docs/keys.md)", err)
	}
	k, err := newTenantKey(id, func(raw []byte) ([]byte, string, error) {
		w, err := a.wrapOwn(ctx, id, service, key, raw)
		return w, key, err
	})
	k.KMSService = service
	var t catalog.Tenant
	if err == nil {
		t, err = a.Cat.NewTenantKeyed(ctx, name, by, k)
	}
	if err != nil {
		dropKMSKey(ctx, a, admin, key)
	}
	return t, err
}

// dropKMSKey deletes a key made for a tenant that was not made, logging
// (without the key's name) a deletion that failed.
func dropKMSKey(ctx context.Context, a *Archive, admin kms.KeyAdmin, key string) {
	if err := admin.DeleteKey(context.WithoutCancel(ctx), key); err != nil {
		a.logError("tenant create: deleting the key made for a tenant that was not made", errors.New("the key service refused or could not be reached"))
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

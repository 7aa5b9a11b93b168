package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
)

// Tenant is one tenant. RetentionDays is nil when the server default applies.
type Tenant struct {
	ID            ids.ID
	Name          string
	Metadata      vocab.Level
	RetentionDays *int
	CreatedAt     time.Time
	Search        vocab.SearchMode
	LawfulBasis   vocab.LawfulMode
}

// ErrNameTaken is returned when a tenant name is already used.
var ErrNameTaken = errors.New("catalog: a tenant already has that name")

// CreateTenant inserts a tenant with a new random id.
func (tx *Tx) CreateTenant(name string) (Tenant, error) {
	return tx.createTenant(ids.NewRandom(), name)
}

func (tx *Tx) createTenant(id ids.ID, name string) (Tenant, error) {
	t := Tenant{ID: id, Name: name, Metadata: vocab.LevelNone, CreatedAt: tx.now, Search: vocab.SearchOff, LawfulBasis: vocab.LawfulOff}
	_, err := tx.exec(`INSERT INTO tenants(id, name, metadata, created_at) VALUES (?, ?, ?, ?)`, t.ID[:], name, string(t.Metadata), nanos(t.CreatedAt))
	if err != nil && strings.Contains(err.Error(), "UNIQUE") {
		return Tenant{}, ErrNameTaken
	}
	return t, err
}

// SetTenantMetadata changes a tenant's metadata level.
func (tx *Tx) SetTenantMetadata(id ids.ID, level vocab.Level) error {
	return tx.updateTenant(`UPDATE tenants SET metadata = ? WHERE id = ?`, string(level), id[:])
}

// SetTenantRetention sets the retention override in days, nil for the
// server default.
func (tx *Tx) SetTenantRetention(id ids.ID, days *int) error {
	var v any
	if days != nil {
		v = *days
	}
	return tx.updateTenant(`UPDATE tenants SET retention_days = ? WHERE id = ?`, v, id[:])
}

func (tx *Tx) updateTenant(q string, args ...any) error {
	res, err := tx.exec(q, args...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

const tenantCols = `id, name, metadata, retention_days, created_at, search, lawful_basis`

// notDeleting keeps out of every lookup a tenant being deleted: from the
// transaction that destroyed its key on, it is unknown (docs/FORMAT.md,
// "Tenant delete").
const notDeleting = ` AND id NOT IN (SELECT tenant FROM tenant_deletions)`

func scanTenant(r row) (Tenant, error) {
	var t Tenant
	var id []byte
	var ret sql.NullInt64
	var created int64
	if err := r.Scan(&id, &t.Name, &t.Metadata, &ret, &created, &t.Search, &t.LawfulBasis); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return t, ErrNotFound
		}
		return t, fmt.Errorf("catalog: read tenant: %w", err)
	}
	copy(t.ID[:], id)
	if ret.Valid {
		d := int(ret.Int64)
		t.RetentionDays = &d
	}
	t.CreatedAt = fromNanos(created)
	return t, nil
}

// Tenant finds a tenant by id.
func (c *Catalog) Tenant(ctx context.Context, id ids.ID) (Tenant, error) {
	return scanTenant(c.queryRow(ctx, `SELECT `+tenantCols+` FROM tenants WHERE id = ?`+notDeleting, id[:]))
}

// Tenant reads a tenant inside a write transaction.
func (tx *Tx) Tenant(id ids.ID) (Tenant, error) {
	return scanTenant(tx.queryRow(`SELECT `+tenantCols+` FROM tenants WHERE id = ?`+notDeleting, id[:]))
}

// FindTenant finds a tenant by its id in text or by its name, as commands
// take either.
func (c *Catalog) FindTenant(ctx context.Context, idOrName string) (Tenant, error) {
	if id, err := ids.Parse(idOrName); err == nil {
		t, err := c.Tenant(ctx, id)
		if err != ErrNotFound {
			return t, err
		}
	}
	return scanTenant(c.queryRow(ctx, `SELECT `+tenantCols+` FROM tenants WHERE name = ?`+notDeleting, idOrName))
}

// Tenants lists every tenant by name.
func (c *Catalog) Tenants(ctx context.Context) ([]Tenant, error) {
	return queryAll(ctx, c.db, "tenants", scanTenant, `SELECT `+tenantCols+` FROM tenants WHERE true`+notDeleting+` ORDER BY name`)
}

// NewTenant creates a tenant and records it in the admin log. Its key is
// made at its first use (NewTenantKeyed makes it with the tenant).
func (c *Catalog) NewTenant(ctx context.Context, name string, by Actor) (Tenant, error) {
	var t Tenant
	err := c.Update(ctx, func(tx *Tx) error {
		var err error
		if t, err = tx.CreateTenant(name); err != nil {
			return err
		}
		return tx.record(by, &t.ID, "tenant_create", "", "")
	})
	return t, err
}

// NewTenantKeyed creates the tenant k.Tenant with its key k, and records
// it in the admin log.
func (c *Catalog) NewTenantKeyed(ctx context.Context, name string, by Actor, k TenantKey) (Tenant, error) {
	var t Tenant
	err := c.Update(ctx, func(tx *Tx) error {
		var err error
		if t, err = tx.createTenant(k.Tenant, name); err != nil {
			return err
		}
		if err := tx.addTenantKey(k); err != nil {
			return err
		}
		return tx.record(by, &t.ID, "tenant_create", "", "")
	})
	return t, err
}

// SetMetadata changes a tenant's metadata level, recorded in both logs.
func (c *Catalog) SetMetadata(ctx context.Context, id ids.ID, level vocab.Level, by Actor) (Tenant, error) {
	if _, err := vocab.ParseLevel(string(level)); err != nil {
		return Tenant{}, err
	}
	return c.changeTenant(ctx, id, by, "tenant_metadata", "metadata", func(tx *Tx) error { return tx.SetTenantMetadata(id, level) })
}

// SetRetention changes a tenant's retention override (nil: the server
// default), recorded in both logs. The purge sweep reads it at each run.
func (c *Catalog) SetRetention(ctx context.Context, id ids.ID, days *int, by Actor) (Tenant, error) {
	return c.changeTenant(ctx, id, by, "tenant_retention", "retention", func(tx *Tx) error { return tx.SetTenantRetention(id, days) })
}

func (c *Catalog) changeTenant(ctx context.Context, id ids.ID, by Actor, adminAction, tenantAction string, change func(*Tx) error) (Tenant, error) {
	var t Tenant
	err := c.Update(ctx, func(tx *Tx) error {
		if err := change(tx); err != nil {
			return err
		}
		if err := tx.record(by, &id, adminAction, tenantAction, ""); err != nil {
			return err
		}
		var err error
		t, err = tx.Tenant(id)
		return err
	})
	return t, err
}

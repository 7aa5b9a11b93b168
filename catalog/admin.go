package catalog

import (
	"context"

	"github.com/vcon-server/vcon-server/ids"
)

// Actor is who made a change, as the audit logs record it: "cli" or
// "key:<key id>", with the key's label.
type Actor struct {
	Name  string
	Label string
}

// CLI is the actor of every command-line change.
var CLI = Actor{Name: "cli"}

func (tx *Tx) record(by Actor, tenant *ids.ID, adminAction, tenantAction, target string) error {
	r := Record{Actor: by.Name, Label: by.Label, Action: adminAction, Target: target, Status: 200}
	if tenant != nil {
		r.Tenant = tenant.String()
	}
	if err := tx.AdminLog(r); err != nil {
		return err
	}
	if tenant != nil && tenantAction != "" {
		r.Action, r.Tenant = tenantAction, ""
		return tx.Audit(*tenant, r)
	}
	return nil
}

// NewTenant creates a tenant and records it in the admin log.
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

// SetMetadata changes a tenant's metadata level, recorded in both logs.
func (c *Catalog) SetMetadata(ctx context.Context, id ids.ID, level Level, by Actor) (Tenant, error) {
	if _, err := ParseLevel(string(level)); err != nil {
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

// Hold sets or releases a legal hold, recorded in both logs.
func (c *Catalog) Hold(ctx context.Context, tenant, uuid ids.ID, held bool, by Actor) error {
	action := "hold_release"
	if held {
		action = "hold_set"
	}
	return c.Update(ctx, func(tx *Tx) error {
		if _, err := tx.Tenant(tenant); err != nil {
			return err
		}
		if err := tx.SetHold(tenant, uuid, held); err != nil {
			return err
		}
		return tx.record(by, &tenant, action, "hold", uuid.String())
	})
}

// NewKey creates a key, recorded in the admin log and, for a tenant key,
// in the tenant's log. The token is returned once and kept nowhere.
func (c *Catalog) NewKey(ctx context.Context, tenant *ids.ID, scopes []string, label string, by Actor) (Key, string, error) {
	var k Key
	var token string
	err := c.Update(ctx, func(tx *Tx) error {
		if tenant != nil {
			if _, err := tx.Tenant(*tenant); err != nil {
				return err
			}
		}
		var err error
		if k, token, err = tx.CreateKey(tenant, scopes, label); err != nil {
			return err
		}
		return tx.record(by, tenant, "key_create", "key", k.ID)
	})
	return k, token, err
}

// Revoke revokes a key, recorded as NewKey records its creation.
func (c *Catalog) Revoke(ctx context.Context, id string, by Actor) (Key, error) {
	var k Key
	err := c.Update(ctx, func(tx *Tx) error {
		var err error
		if k, err = tx.RevokeKey(id); err != nil {
			return err
		}
		return tx.record(by, k.Tenant, "key_revoke", "key", k.ID)
	})
	return k, err
}

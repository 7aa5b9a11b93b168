package catalog

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

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

// MarshalJSON is the tenant as commands print it and the admin API answers.
func (t Tenant) MarshalJSON() ([]byte, error) {
	var ret *string
	if t.RetentionDays != nil {
		s := strconv.Itoa(*t.RetentionDays) + "d"
		ret = &s
	}
	return json.Marshal(struct {
		ID        string  `json:"id"`
		Name      string  `json:"name"`
		Metadata  string  `json:"metadata"`
		Retention *string `json:"retention"`
		Search    string  `json:"search"`
		CreatedAt string  `json:"created_at"`
	}{t.ID.String(), t.Name, t.Metadata, ret, t.Search, t.CreatedAt.Format(time.RFC3339Nano)})
}

// MarshalJSON is the key as listed; the token is never part of it.
func (k Key) MarshalJSON() ([]byte, error) {
	var tenant, revoked *string
	if k.Tenant != nil {
		s := k.Tenant.String()
		tenant = &s
	}
	if k.RevokedAt != nil {
		s := k.RevokedAt.Format(time.RFC3339Nano)
		revoked = &s
	}
	scopes := k.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	return json.Marshal(struct {
		ID        string   `json:"id"`
		Tenant    *string  `json:"tenant"`
		Operator  bool     `json:"operator"`
		Scopes    []string `json:"scopes"`
		Label     string   `json:"label"`
		CreatedAt string   `json:"created_at"`
		RevokedAt *string  `json:"revoked_at"`
	}{k.ID, tenant, k.Operator(), scopes, k.Label, k.CreatedAt.Format(time.RFC3339Nano), revoked})
}

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
func (c *Catalog) SetMetadata(ctx context.Context, id ids.ID, level string, by Actor) (Tenant, error) {
	if err := CheckLevel(level); err != nil {
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

package catalog

import (
	"context"

	"github.com/vcon-server/vcon-server/internal/ids"
)

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

// SetHold sets or releases a legal hold on a uuid of a tenant. A hold may
// be set before the vCon arrives.
func (tx *Tx) SetHold(tenant, uuid ids.ID, held bool) error {
	if held {
		_, err := tx.exec(`INSERT INTO vcons(tenant, uuid, held) VALUES (?, ?, 1) ON CONFLICT(tenant, uuid) DO UPDATE SET held = 1`, tenant[:], uuid[:])
		return err
	}
	if _, err := tx.exec(`UPDATE vcons SET held = 0 WHERE tenant = ? AND uuid = ?`, tenant[:], uuid[:]); err != nil {
		return err
	}
	_, err := tx.exec(`DELETE FROM vcons WHERE tenant = ? AND uuid = ? AND current IS NULL
		AND NOT EXISTS (SELECT 1 FROM versions WHERE tenant = ? AND uuid = ?)`, tenant[:], uuid[:], tenant[:], uuid[:])
	return err
}

// Holds lists a tenant's held uuids.
func (c *Catalog) Holds(ctx context.Context, tenant ids.ID) ([]ids.ID, error) {
	return queryAll(ctx, c.db, "held vCons", scanID, `SELECT uuid FROM vcons WHERE tenant = ? AND held = 1 ORDER BY uuid`, tenant[:])
}

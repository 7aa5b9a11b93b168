package catalog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/ids"
)

// TestOutboxInTheChangesTransaction: the triggers write an event in the
// transaction of the change it announces, for a tenant with a webhook
// only; a change rolled back leaves no event; a catalog that lost its
// triggers (one rebuilt from the replica) has them again at its next open.
func TestOutboxInTheChangesTransaction(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c, _, err := Create(ctx, dir, make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	var hooked, quiet Tenant
	if err := c.Update(ctx, func(tx *Tx) error {
		var err error
		if hooked, err = tx.CreateTenant("hooked"); err != nil {
			return err
		}
		quiet, err = tx.CreateTenant("quiet")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetWebhook(ctx, Webhook{Tenant: hooked.ID, URL: "https://example.com/h", Secret: []byte("sealed")}, CLI); err != nil {
		t.Fatal(err)
	}
	uuid := ids.NewRandom()
	version := func(tenant ids.ID) Version {
		return Version{ID: ids.NewV7(time.Now()), Tenant: tenant, UUID: uuid, StoredAt: time.Now(), ContentType: "application/vcon",
			Form: "unsigned", Location: InDir, WrappedKey: make([]byte, 61)}
	}
	store := func(v Version, fail bool) {
		err := c.Update(ctx, func(tx *Tx) error {
			if _, err := tx.InsertVersion(v, Replace); err != nil {
				return err
			}
			if fail {
				return errors.New("rolled back")
			}
			return nil
		})
		if (err != nil) != fail {
			t.Fatal(err)
		}
	}
	v1, v2 := version(hooked.ID), version(hooked.ID)
	store(v1, false)
	store(version(hooked.ID), true)
	store(v2, false)
	store(version(quiet.ID), false)
	if err := c.Update(ctx, func(tx *Tx) error { _, err := tx.Hide(hooked.ID, uuid); return err }); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		typ     string
		version ids.ID
	}{{EventStored, v1.ID}, {EventReplaced, v2.ID}, {EventDeleted, v2.ID}}
	check := func(c *Catalog) {
		t.Helper()
		evs, err := c.DueEvents(ctx, time.Now(), 100)
		if err != nil {
			t.Fatal(err)
		}
		// Only the vCon's oldest pending event is due; take them in turn.
		for i, w := range want {
			if len(evs) != 1 || evs[0].Type != w.typ || evs[0].Version != w.version || evs[0].Tenant != hooked.ID || evs[0].UUID != uuid {
				t.Fatalf("event %d: %+v, want %s of %s", i, evs, w.typ, w.version)
			}
			if err := c.RecordOutcomes(ctx, []Outcome{{ID: evs[0].ID, Delivered: true}}); err != nil {
				t.Fatal(err)
			}
			if evs, err = c.DueEvents(ctx, time.Now(), 100); err != nil {
				t.Fatal(err)
			}
		}
		if len(evs) != 0 {
			t.Fatalf("events left: %+v", evs)
		}
	}
	check(c)
	// A catalog without its triggers gets them back at its next open.
	if _, err := c.DB().Exec(`DROP TRIGGER webhook_vcon_new; DROP TRIGGER webhook_vcon_current`); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if c, err = Open(ctx, dir); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	uuid = ids.NewRandom()
	v1, v2 = version(hooked.ID), version(hooked.ID)
	store(v1, false)
	store(v2, false)
	if err := c.Update(ctx, func(tx *Tx) error { _, err := tx.Hide(hooked.ID, uuid); return err }); err != nil {
		t.Fatal(err)
	}
	want[0].version, want[1].version, want[2].version = v1.ID, v2.ID, v2.ID
	check(c)
	// Off drops what is pending, and no event is written after.
	store(version(hooked.ID), false)
	if n, err := c.DropWebhook(ctx, hooked.ID, CLI); err != nil || n != 1 {
		t.Fatalf("DropWebhook: %d, %v", n, err)
	}
	store(version(hooked.ID), false)
	if p, f, err := c.EventCounts(ctx); err != nil || p+f != 0 {
		t.Fatalf("events after off: %d %d %v", p, f, err)
	}
}

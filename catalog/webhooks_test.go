package catalog

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
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
		evs, err := c.DueEvents(ctx, time.Now(), ids.ID{}, 100, 100)
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
			if evs, err = c.DueEvents(ctx, time.Now(), ids.ID{}, 100, 100); err != nil {
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

// TestErasureEventOnceAfterItsPurges: an erasure writes one
// erasure.completed, named by its id, in the transaction that records it
// done, for a tenant with a webhook only; the rows of its purged versions
// going write none; and it is due only once the events made before it of
// the vCons it took are delivered or failed, whatever other vCons wait.
// A catalog made before the event moved loses the per-version trigger.
func TestErasureEventOnceAfterItsPurges(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c, _, err := Create(ctx, dir, make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Close() }()
	hooked, err := c.NewTenant(ctx, "hooked", CLI)
	if err != nil {
		t.Fatal(err)
	}
	quiet, err := c.NewTenant(ctx, "quiet", CLI)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetWebhook(ctx, Webhook{Tenant: hooked.ID, URL: "https://example.com/h", Secret: []byte("sealed")}, CLI); err != nil {
		t.Fatal(err)
	}
	a, b, other := ids.NewRandom(), ids.NewRandom(), ids.NewRandom()
	store := func(tenant ids.ID, uuids ...ids.ID) {
		t.Helper()
		if err := c.Update(ctx, func(tx *Tx) error {
			for _, u := range uuids {
				v := Version{ID: ids.NewV7(time.Now()), Tenant: tenant, UUID: u, StoredAt: time.Now(), ContentType: "application/vcon",
					Form: vocab.FormUnsigned, Location: InDir, WrappedKey: make([]byte, 61)}
				if _, err := tx.InsertVersion(v, Replace); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	store(hooked.ID, a, b, a, other)
	store(quiet.ID, a)
	erase := func(tenant ids.ID, uuids ...ids.ID) ids.ID {
		t.Helper()
		id := ids.NewV7(time.Now())
		if _, err := eraseNow(t, c, EraseRequest{ID: id, Tenant: tenant, Kind: "uuids", UUIDs: uuids, Limit: 10}); err != nil {
			t.Fatal(err)
		}
		// The purges end: every copy gone, the rows forgotten.
		if _, err := c.db.Exec(`DELETE FROM versions WHERE purge <> 0 AND tenant = ?`, tenant[:]); err != nil {
			t.Fatal(err)
		}
		if err := c.Update(ctx, func(tx *Tx) error {
			done, err := tx.FinishErasure(id, time.Now(), "receipt", "", Record{Actor: "test", Action: "erase", Status: 200}, tenant)
			if err != nil || !done {
				return fmt.Errorf("finish: %v %v", done, err)
			}
			return tx.ErasureCompleted(tenant, id)
		}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	id := erase(hooked.ID, a, b)
	erase(quiet.ID, a)
	var n int
	if err := c.db.QueryRow(`SELECT count(*) FROM webhook_events WHERE type = ?`, EventErased).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d erasure events (%v), want 1", n, err)
	}
	// One of a's events fails for good: it holds nothing back.
	if _, err := c.db.Exec(`UPDATE webhook_events SET failed = 1 WHERE id = (SELECT min(id) FROM webhook_events WHERE uuid = ?)`, a[:]); err != nil {
		t.Fatal(err)
	}
	pending := func(u ids.ID) int {
		var n int
		c.db.QueryRow(`SELECT count(*) FROM webhook_events WHERE uuid = ? AND failed = 0`, u[:]).Scan(&n)
		return n
	}
	sent := 0
	for round := 0; ; round++ {
		evs, err := c.DueEvents(ctx, time.Now(), ids.ID{}, 100, 100)
		if err != nil {
			t.Fatal(err)
		}
		var outs []Outcome
		erasure := false
		for _, e := range evs {
			if e.Type == EventErased {
				erasure = true
				if e.Erasure != id || e.UUID != (ids.ID{}) || e.Version != (ids.ID{}) || e.Tenant != hooked.ID {
					t.Fatalf("erasure event %+v, want erasure %s", e, id)
				}
				if pending(a)+pending(b) != 0 {
					t.Fatalf("round %d: the erasure's event is due while its vCons' events wait", round)
				}
			}
			if e.UUID != other { // the other vCon's event stays pending
				outs = append(outs, Outcome{ID: e.ID, Delivered: true})
			}
		}
		if len(outs) == 0 {
			break
		}
		if err := c.RecordOutcomes(ctx, outs); err != nil {
			t.Fatal(err)
		}
		if erasure {
			sent++
		}
	}
	if sent != 1 || pending(other) != 1 {
		t.Fatalf("erasure event sent %d times, %d events of the other vCon pending; want 1 and 1", sent, pending(other))
	}
	// A catalog at schema 6 still has the per-version trigger: migration
	// 7 drops it.
	if _, err := c.db.Exec(`CREATE TRIGGER webhook_version_erased AFTER DELETE ON versions WHEN OLD.purge <> 0 BEGIN SELECT 1; END`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.db.Exec(migrations[6]); err != nil {
		t.Fatal(err)
	}
	if err := c.db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'webhook_version_erased'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the per-version trigger after a migration: %d, %v", n, err)
	}
}

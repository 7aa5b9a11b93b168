package auditlog_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/auditlog"
	"github.com/vcon-server/vcon-server/internal/translog"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/seal"
)

func read(t *testing.T, s objstore.Store, key string) ([]byte, error) {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// TestCopy: the copy holds the newest checkpoint and every hash tile it
// covers, the served tiles' bytes, never an entry bundle; a later copy
// writes the new tiles and drops the partial ones they supersede; a copy
// whose bucket holds another log's tile stops and says so.
func TestCopy(t *testing.T) {
	ctx := context.Background()
	cat, logs, tn := setup(t, 700)
	store, err := objstore.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := auditlog.NewCopier(logs, store, store)
	if len(c.Targets) != 1 {
		t.Fatalf("%d targets of one store", len(c.Targets))
	}
	log := catalog.LogID(tn.ID)
	dir := auditlog.CopyFolder(log)
	check := func(size uint64, tiles ...string) {
		t.Helper()
		if err := c.Copy(ctx); err != nil {
			t.Fatal(err)
		}
		note, n, err := logs.Checkpoint(ctx, log)
		if err != nil || n != size {
			t.Fatalf("the checkpoint covers %d records (%v), want %d", n, err, size)
		}
		if got, err := read(t, store, dir+"checkpoint"); err != nil || !bytes.Equal(got, note) {
			t.Fatalf("the copy's checkpoint %q (%v), the log's %q", got, err, note)
		}
		var keys []string
		store.List(ctx, dir+"tile/", func(i objstore.Info) error {
			keys = append(keys, strings.TrimPrefix(i.Key, dir+"tile/"))
			return nil
		})
		if strings.Join(keys, " ") != strings.Join(tiles, " ") {
			t.Fatalf("the copy holds the tiles %v, want %v", keys, tiles)
		}
		for _, k := range keys {
			tile, err := translog.ParseTile(k)
			if err != nil {
				t.Fatal(err)
			}
			want, err := logs.Tile(ctx, log, tile)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := read(t, store, dir+"tile/"+k); !bytes.Equal(got, want) {
				t.Errorf("the copy's tile %s is not the one served", k)
			}
		}
	}
	check(700, "0/000", "0/001", "0/002.p/188", "1/000.p/2")
	appendRecords(t, cat, tn, 100)
	if _, err := logs.Sign(ctx); err != nil {
		t.Fatal(err)
	}
	check(800, "0/000", "0/001", "0/002", "0/003.p/32", "1/000.p/3")
	// The admin log is copied too, under logs/admin/.
	if _, err := read(t, store, "logs/admin/checkpoint"); err != nil {
		t.Errorf("the admin log's copy: %v", err)
	}

	// A copy the catalog lost its record of writes nothing new: each
	// tile it finds is the catalog's.
	exec(t, cat, `DELETE FROM meta WHERE key = 'log_copies'`)
	check(800, "0/000", "0/001", "0/002", "0/003.p/32", "1/000.p/3")
	// One that differs is another log's: refused, and named.
	objstore.Put(ctx, store, dir+"tile/0/001", bytes.NewReader(make([]byte, 256*32)), false)
	exec(t, cat, `DELETE FROM meta WHERE key = 'log_copies'`)
	if err := c.Copy(ctx); err == nil || !strings.Contains(err.Error(), "tile 0/001 is not the catalog's") {
		t.Fatalf("a copy over another log's tile: %v", err)
	}
}

// TestCheckpointEvent: a tenant with a webhook gets an audit.checkpoint
// event in the transaction that records each new checkpoint, its size in
// the row; CheckpointAt makes the same note again at that size, and
// refuses a size never signed.
func TestCheckpointEvent(t *testing.T) {
	ctx := context.Background()
	cat, logs, tn := setup(t, 9)
	mk, _ := seal.MasterKeyFromBytes(bytes.Repeat([]byte{7}, seal.KeySize))
	if err := cat.SetWebhook(ctx, catalog.Webhook{Tenant: tn.ID, URL: "https://example.com/hook", Secret: []byte("sealed"), KeyCheck: mk.CheckValue()}, catalog.CLI); err != nil {
		t.Fatal(err)
	}
	first, _, _ := logs.Checkpoint(ctx, catalog.LogID(tn.ID))
	if _, err := logs.Sign(ctx); err != nil { // the webhook's record, the tenant's 10th
		t.Fatal(err)
	}
	appendRecords(t, cat, tn, 5)
	if _, err := logs.Sign(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := logs.Sign(ctx); err != nil { // nothing new: no event
		t.Fatal(err)
	}
	var sizes []uint64
	evs, err := cat.DueEvents(ctx, farFuture, [16]byte{}, 10, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type != catalog.EventCheckpoint || e.Tenant != tn.ID {
			t.Fatalf("event %+v", e)
		}
		sizes = append(sizes, e.Size)
	}
	// A log's checkpoints are one lane: the first is due, the next waits.
	if len(sizes) != 1 || sizes[0] != 10 {
		t.Fatalf("due checkpoint events of sizes %v, want [10]", sizes)
	}
	for _, size := range []uint64{10, 15} {
		origin, note, err := logs.CheckpointAt(ctx, catalog.LogID(tn.ID), size)
		if err != nil || origin != logs.Origin(catalog.LogID(tn.ID)) || !strings.Contains(string(note), "\n"+itoa(size)+"\n") {
			t.Fatalf("CheckpointAt(%d): %q %q %v", size, origin, note, err)
		}
	}
	// The checkpoint of 9 records, made again, is the one signed then.
	if _, again, err := logs.CheckpointAt(ctx, catalog.LogID(tn.ID), 9); err != nil || !bytes.Equal(again, first) {
		t.Fatalf("the checkpoint of 9 made again:\n%s\nsigned then:\n%s (%v)", again, first, err)
	}
	if _, _, err := logs.CheckpointAt(ctx, catalog.LogID(tn.ID), 16); err == nil {
		t.Fatal("a checkpoint of a size never signed")
	}
	if _, _, err := logs.CheckpointAt(ctx, catalog.LogID(catalog.Tenant{}.ID), 1); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("a log with no checkpoint: %v", err)
	}
}

var farFuture = time.Now().Add(time.Hour)

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

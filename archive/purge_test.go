package archive_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/seal"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/archivetest"
)

// failingDeletes is a store whose deletes fail while broken is set.
type failingDeletes struct {
	objstore.Store
	broken atomic.Bool
}

func (f *failingDeletes) Delete(ctx context.Context, key string) error {
	if f.broken.Load() {
		return errors.New("injected: the storage refused the delete")
	}
	return f.Store.Delete(ctx, key)
}

func newArchive(t *testing.T) (*archive.Archive, *failingDeletes, ids.ID) {
	k := archivetest.New(t)
	d, err := objstore.NewDir(k.Dir)
	if err != nil {
		t.Fatal(err)
	}
	fd := &failingDeletes{Store: d}
	return k.Archive(t, archive.Config{Objects: fd, Loc: catalog.InDir, DefaultRetention: 0, Now: time.Now}), fd, k.Tenant
}

// TestZeroRetentionPurgeFailure: a 0d DELETE whose object delete fails
// reports ErrPurgeIncomplete (a 5xx), the vCon is unreadable at once, and
// the sweep finishes the purge once the storage works again.
func TestZeroRetentionPurgeFailure(t *testing.T) {
	ctx := context.Background()
	a, fd, tenant := newArchive(t)
	uuid := ids.NewRandom()
	body := apitest.NewVcon(uuid.String(), "x", "+15555550100")
	if _, err := a.Store(ctx, archive.StoreRequest{Tenant: tenant, Mode: catalog.CreateOnly, Body: bytes.NewReader(body), ContentType: "application/vcon"}); err != nil {
		t.Fatal(err)
	}
	fd.broken.Store(true)
	if err := a.Delete(ctx, tenant, uuid); !errors.Is(err, archive.ErrPurgeIncomplete) {
		t.Fatalf("Delete: %v, want ErrPurgeIncomplete", err)
	}
	if _, _, err := a.Open(ctx, tenant, uuid); !errors.Is(err, archive.ErrNotFound) {
		t.Fatalf("Open after a failed purge: %v", err)
	}
	purging, _ := a.Cat.Purging(ctx)
	if len(purging) != 1 || purging[0].WrappedKey != nil {
		t.Fatalf("purging: %+v", purging)
	}
	if n, err := a.Sweep(ctx); err == nil || n != 0 {
		t.Fatalf("sweep with broken storage: %d, %v", n, err)
	}
	fd.broken.Store(false)
	if n, err := a.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	if purging, _ := a.Cat.Purging(ctx); len(purging) != 0 {
		t.Fatalf("still purging: %+v", purging)
	}
	var left int
	objstore.Store(fd).List(ctx, "objects/", func(objstore.Info) error { left++; return nil })
	if left != 0 {
		t.Fatalf("%d objects left", left)
	}
}

// TestSealedCopyUnreadableAfterPurge: bytes copied aside before a purge
// cannot be opened after it, since their key is gone.
func TestSealedCopyUnreadableAfterPurge(t *testing.T) {
	ctx := context.Background()
	a, _, tenant := newArchive(t)
	uuid := ids.NewRandom()
	body := apitest.NewVcon(uuid.String(), "x", "+15555550100")
	if _, err := a.Store(ctx, archive.StoreRequest{Tenant: tenant, Mode: catalog.CreateOnly, Body: bytes.NewReader(body), ContentType: "application/vcon"}); err != nil {
		t.Fatal(err)
	}
	v, err := a.Cat.Current(ctx, tenant, uuid)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := a.Sealed(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	copyAside, _ := io.ReadAll(rc)
	rc.Close()
	if err := a.Delete(ctx, tenant, uuid); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Cat.Version(ctx, v.ID); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("the version row outlived its purge: %v", err)
	}
	// Nothing in the catalog can open the copy: the only key was v's, now
	// gone; a guessed key fails authentication.
	var guess seal.DataKey
	r, err := seal.NewReader(bytes.NewReader(copyAside), guess, tenant, v.ID)
	if err == nil {
		_, err = io.ReadAll(r)
	}
	if !errors.Is(err, seal.ErrDamaged) {
		t.Fatalf("opening the copy: %v", err)
	}
}

// slowDeletes is a store whose deletes take a while, and which notes the
// keys the sweep deleted (its context carries sweeping{}).
type slowDeletes struct {
	objstore.Store
	delay time.Duration
	swept sync.Map // key -> true: deleted by the sweep
}

type sweeping struct{}

func (s *slowDeletes) Delete(ctx context.Context, key string) error {
	if ctx.Value(sweeping{}) != nil {
		s.swept.Store(key, true)
	}
	time.Sleep(s.delay)
	return s.Store.Delete(ctx, key)
}

// TestZeroRetentionDeleteRacesTheSweep: the sweep and a 0d DELETE on the
// same version at once. Whichever destroys the key, the DELETE answers
// only once the object is proven gone and the row forgotten: when the
// sweep took the version first, the DELETE waits for it (or finishes it)
// rather than answering 204 over bytes still in storage.
func TestZeroRetentionDeleteRacesTheSweep(t *testing.T) {
	ctx := context.Background()
	a, fd, tenant := newArchive(t)
	slow := &slowDeletes{Store: fd.Store, delay: 2 * time.Millisecond}
	a.Objects = slow
	sweepCtx, stop := context.WithCancel(context.WithValue(ctx, sweeping{}, true))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for sweepCtx.Err() == nil {
			a.Sweep(sweepCtx)
		}
	}()
	defer func() { stop(); wg.Wait() }()
	rounds, sweepFirst := 100, 0
	if testing.Short() {
		rounds = 30
	}
	for i := 0; i < rounds; i++ {
		uuid, v, key := storeRace(t, a, tenant)
		if err := a.Delete(ctx, tenant, uuid); err != nil {
			t.Fatalf("round %d: Delete: %v", i, err)
		}
		if _, err := slow.Stat(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("round %d: the DELETE answered while the object was still there: %v", i, err)
		}
		if _, err := a.Cat.Version(ctx, v.ID); !errors.Is(err, catalog.ErrNotFound) {
			t.Fatalf("round %d: the DELETE answered before the purge was recorded done: %v", i, err)
		}
		if _, ok := slow.swept.Load(key); ok {
			sweepFirst++
		}
	}
	t.Logf("%d of %d rounds: the sweep deleted the object too", sweepFirst, rounds)
}

// TestZeroRetentionDeleteWaitsForThePurgeUnderWay: the sweep's Purge of a
// version destroys its key in the very transaction after the DELETE's
// hide (the catalog's writer is held while both queue), so the DELETE's
// own purge finds the key gone and the sweep still deleting the object,
// slowly. The DELETE answers only once the object is proven gone; a purge
// whose deletes fail makes it answer ErrPurgeIncomplete.
func TestZeroRetentionDeleteWaitsForThePurgeUnderWay(t *testing.T) {
	for _, broken := range []bool{false, true} {
		ctx := context.Background()
		a, fd, tenant := newArchive(t)
		slow := &slowSweep{Store: fd, delay: 100 * time.Millisecond}
		a.Objects = slow
		sweepCtx := context.WithValue(ctx, sweeping{}, true)
		raced := 0
		for i := 0; i < 5; i++ {
			uuid, v, key := storeRace(t, a, tenant)
			fd.broken.Store(broken)

			// Hold the writer, queue the DELETE's hide, then the sweep's
			// purge of the same version: one batch runs both, in order.
			held, release := make(chan struct{}), make(chan struct{})
			go a.Cat.Update(ctx, func(*catalog.Tx) error { close(held); <-release; return nil })
			<-held
			deleted := make(chan error, 1)
			go func() { deleted <- a.Delete(ctx, tenant, uuid) }()
			time.Sleep(20 * time.Millisecond)
			swept := make(chan int, 1)
			go func() { n, _ := a.Purge(sweepCtx, []ids.ID{v.ID}); swept <- n }()
			time.Sleep(20 * time.Millisecond)
			close(release)

			err := <-deleted
			_, statErr := fd.Stat(ctx, key)
			_, rowErr := a.Cat.Version(ctx, v.ID)
			if <-swept == 1 {
				raced++
			}
			switch {
			case broken:
				if !errors.Is(err, archive.ErrPurgeIncomplete) {
					t.Fatalf("round %d, deletes failing: Delete: %v, want ErrPurgeIncomplete", i, err)
				}
				fd.broken.Store(false)
				if _, err := a.Sweep(ctx); err != nil {
					t.Fatalf("sweep: %v", err)
				}
			case err != nil:
				t.Fatalf("round %d: Delete: %v", i, err)
			case !errors.Is(statErr, objstore.ErrNotFound):
				t.Fatalf("round %d: the DELETE answered while the sweep was still deleting the object: stat %v", i, statErr)
			case !errors.Is(rowErr, catalog.ErrNotFound):
				t.Fatalf("round %d: the DELETE answered before the purge was recorded done: %v", i, rowErr)
			}
		}
		if raced == 0 {
			t.Fatalf("the sweep never destroyed the key before the DELETE: the test did not race")
		}
	}
}

// slowSweep is a store whose deletes, asked by the sweep, take delay.
type slowSweep struct {
	objstore.Store
	delay time.Duration
}

func (s *slowSweep) Delete(ctx context.Context, key string) error {
	if ctx.Value(sweeping{}) != nil {
		time.Sleep(s.delay)
	}
	return s.Store.Delete(ctx, key)
}

// storeRace stores one vCon and returns its uuid, its version and the key
// of its object.
func storeRace(t *testing.T, a *archive.Archive, tenant ids.ID) (ids.ID, catalog.Version, string) {
	t.Helper()
	ctx := context.Background()
	uuid := ids.NewRandom()
	body := apitest.NewVcon(uuid.String(), "race", "+15555550100")
	if _, err := a.Store(ctx, archive.StoreRequest{Tenant: tenant, Mode: catalog.CreateOnly, Body: bytes.NewReader(body), ContentType: "application/vcon"}); err != nil {
		t.Fatal(err)
	}
	v, err := a.Cat.Current(ctx, tenant, uuid)
	if err != nil {
		t.Fatal(err)
	}
	return uuid, v, archive.ObjectKey(v.Location, tenant, v.ID)
}

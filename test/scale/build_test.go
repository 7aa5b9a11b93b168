package scale

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/seal"
	"github.com/vcon-server/vcon-server/vcon"
)

// storers is how many goroutines call archive.Store at once while the data
// is built: enough for the catalog's group commit to fill its batches and
// for the object syncs to overlap.
const storers = 64

// vconSize is the size of every vCon the benchmark stores.
const vconSize = 1024

// body is an unsigned vCon of vconSize bytes: two parties and one text
// dialog, so that level counts has something to count.
func body(uuid ids.ID, i int) []byte {
	head := fmt.Sprintf(`{"vcon":"0.4.0","uuid":%q,"created_at":"2026-11-05T12:00:00Z","subject":"Scale %d","parties":[{"tel":"+1555%07d","name":"Caller"},{"mailto":"mailto:agent@example.com"}],"dialog":[{"type":"text","start":"2026-11-05T12:00:00Z","parties":[0,1],"body":"`,
		uuid.String(), i, i%10000000)
	tail := `"}],"attachments":[],"analysis":[]}`
	pad := vconSize - len(head) - len(tail)
	if pad < 0 {
		pad = 0
	}
	return []byte(head + strings.Repeat("x", pad) + tail)
}

// plan is the data of one size: n versions over the tenants, of which
// the last tenth are PUTs replacing a vCon stored in the first part, so
// that a tenth of the versions are hidden and, at retention 0d, purged.
type plan struct {
	n        int
	tenants  []ids.ID
	creates  int // POSTs: a new uuid each
	replaces int // PUTs of uuids of the first creates, hiding a version each
}

func newPlan(n int, tenants []ids.ID) plan {
	r := n / 10
	return plan{n: n, tenants: tenants, creates: n - r, replaces: r}
}

// tenantOf is the tenant of the i-th create (and of the i-th replace,
// which replaces the i-th create's vCon).
func (p plan) tenantOf(i int) int { return i % len(p.tenants) }

// current is how many vCons of tenant k have a current version: its
// creates (a replace keeps the count).
func (p plan) current(k int) int {
	c := 0
	for i := k; i < p.creates; i += len(p.tenants) {
		c++
	}
	return c
}

// kept is how many versions of tenant k the catalog keeps before a purge.
func (p plan) kept(k int) int {
	c := p.current(k)
	for i := k; i < p.replaces; i += len(p.tenants) {
		c++
	}
	return c
}

// Build modes: how the versions get into the data directory.
const (
	// buildStore calls archive.Archive.Store for every version: each
	// version sealed under its own data key, its object written and synced
	// through objstore.Dir, its row (with the wrapped key) committed by
	// the catalog's group commit. Exactly a POST or PUT without HTTP; a
	// sync per object, so a few hundred to a thousand versions a second
	// on this kind of disk.
	buildStore = "store"
	// buildDirect does the same steps without a sync per object: each
	// body inspected with vcon.Inspect, sealed with seal.NewWriter under a
	// new data key, written as a file at its object key
	// (archive.ObjectKey), the data key wrapped with the master key, and
	// the rows inserted with the catalog's own InsertVersion, 2000 to a
	// transaction; one sync(2) at the end. The bytes and rows are those a
	// store makes; only the durability steps are batched.
	buildDirect = "direct"
)

// build puts the plan's versions into the data directory that init made,
// holding its lock as serve would, and returns how long it took.
func build(t *testing.T, dataDir, masterKey string, p plan, mode string) time.Duration {
	ctx := context.Background()
	unlock, err := catalog.Lock(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	mk, err := seal.LoadMasterKey(masterKey)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Open(ctx, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	// A serve without [replica] drops the change log's triggers at its
	// first start (docs/FORMAT.md, "Replica"), before any store; without
	// this the build would fill replica_log, and the measured start-up
	// would be that one-time clean-up.
	if err := cat.DisableChangeLog(ctx); err != nil {
		t.Fatal(err)
	}
	uuids := make([]ids.ID, p.creates)
	for i := range uuids {
		uuids[i] = ids.NewRandom()
	}
	start := time.Now()
	var done atomic.Int64
	stopProgress := progress(t, p.n, &done, start)
	defer stopProgress()
	var put func(creates bool, n int) error
	switch mode {
	case buildStore:
		put = storeVersions(ctx, t, dataDir, mk, cat, p, uuids, &done)
	case buildDirect:
		put = directVersions(ctx, t, dataDir, mk, cat, p, uuids, &done)
	default:
		t.Fatalf("VCON_SCALE_BUILD=%q: want %q or %q", mode, buildStore, buildDirect)
	}
	// The creates first, then the replaces, each over many goroutines.
	if err := put(true, p.creates); err != nil {
		t.Fatal(err)
	}
	if err := put(false, p.replaces); err != nil {
		t.Fatal(err)
	}
	if mode == buildDirect {
		syscall.Sync()
	}
	return time.Since(start)
}

// storeVersions stores through archive.Archive.Store (buildStore).
func storeVersions(ctx context.Context, t *testing.T, dataDir string, mk *seal.MasterKey, cat *catalog.Catalog, p plan, uuids []ids.ID, done *atomic.Int64) func(bool, int) error {
	objects, err := objstore.NewDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := archive.New(archive.Config{Cat: cat, Objects: objects, Loc: catalog.InDir, Key: mk,
		MaxSize: 64 << 20, DefaultRetention: 30 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return func(creates bool, n int) error {
		return parallel(n, storers, func(i int) error {
			req := archive.StoreRequest{Tenant: p.tenants[p.tenantOf(i)], Mode: catalog.CreateOnly,
				Body: bytes.NewReader(body(uuids[i], i)), ContentType: "application/vcon"}
			if !creates {
				req.Mode, req.UUID = catalog.Replace, &uuids[i]
			}
			if _, err := a.Store(ctx, req); err != nil {
				return fmt.Errorf("store %d: %w", i, err)
			}
			done.Add(1)
			return nil
		})
	}
}

// sealers is how many goroutines seal and write objects in buildDirect:
// more only contend for the folders' locks.
var sealers = max(2, runtime.NumCPU())

// directBatch is how many rows one catalog transaction inserts.
const directBatch = 2000

// directVersions writes objects and rows directly (buildDirect).
func directVersions(ctx context.Context, t *testing.T, dataDir string, mk *seal.MasterKey, cat *catalog.Catalog, p plan, uuids []ids.ID, done *atomic.Int64) func(bool, int) error {
	for _, tn := range p.tenants {
		folder := filepath.Dir(filepath.Join(dataDir, filepath.FromSlash(archive.ObjectKey(catalog.InDir, tn, tn))))
		if err := os.MkdirAll(folder, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return func(creates bool, n int) error {
		mode := catalog.CreateOnly
		if !creates {
			mode = catalog.Replace
		}
		rows := make(chan catalog.Version, 4*directBatch)
		committed := make(chan error, 1)
		go func() {
			var err error
			batch := make([]catalog.Version, 0, directBatch)
			flush := func() {
				if len(batch) == 0 || err != nil {
					return
				}
				err = cat.Update(ctx, func(tx *catalog.Tx) error {
					for _, v := range batch {
						if _, err := tx.InsertVersion(v, mode); err != nil {
							return err
						}
					}
					return nil
				})
				done.Add(int64(len(batch)))
				batch = batch[:0]
			}
			for v := range rows {
				if batch = append(batch, v); len(batch) == directBatch {
					flush()
				}
			}
			flush()
			committed <- err
		}()
		err := parallel(n, sealers, func(i int) error {
			v, err := sealOne(dataDir, mk, p.tenants[p.tenantOf(i)], uuids[i], body(uuids[i], i))
			if err != nil {
				return fmt.Errorf("version %d: %w", i, err)
			}
			rows <- v
			return nil
		})
		close(rows)
		if cerr := <-committed; err == nil {
			err = cerr
		}
		return err
	}
}

// sealOne does what Store does before its commit, but for the sync:
// inspect, seal under a new data key, write the object, wrap the key.
func sealOne(dataDir string, mk *seal.MasterKey, tenant, uuid ids.ID, b []byte) (catalog.Version, error) {
	meta, err := vcon.Inspect(bytes.NewReader(b), false, 64<<20)
	if err != nil {
		return catalog.Version{}, err
	}
	if meta.UUID != uuid.String() {
		return catalog.Version{}, fmt.Errorf("inspected uuid %s, want %s", meta.UUID, uuid)
	}
	now := time.Now()
	vid := ids.NewV7(now)
	dk, err := seal.NewDataKey()
	if err != nil {
		return catalog.Version{}, err
	}
	var sealed bytes.Buffer
	sw, err := seal.NewWriter(&sealed, dk, tenant, vid)
	if err != nil {
		return catalog.Version{}, err
	}
	if _, err := sw.Write(b); err != nil {
		return catalog.Version{}, err
	}
	if err := sw.Close(); err != nil {
		return catalog.Version{}, err
	}
	path := filepath.Join(dataDir, filepath.FromSlash(archive.ObjectKey(catalog.InDir, tenant, vid)))
	if err := os.WriteFile(path, sealed.Bytes(), 0o600); err != nil {
		return catalog.Version{}, err
	}
	wrapped, err := mk.Wrap(dk, tenant, vid)
	if err != nil {
		return catalog.Version{}, err
	}
	return catalog.Version{
		ID: vid, Tenant: tenant, UUID: uuid, StoredAt: now, ContentType: "application/vcon",
		Form: meta.Form, Size: meta.Size, SealedSize: seal.SealedSize(meta.Size),
		WrappedKey: wrapped, Location: catalog.InDir,
	}, nil
}

// parallel runs fn(0..n-1) over g goroutines and returns the first error.
func parallel(n, g int, fn func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// progress logs the build's rate every 30 seconds until stopped.
func progress(t *testing.T, total int, done *atomic.Int64, start time.Time) func() {
	stop := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(30 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				n := done.Load()
				secs := time.Since(start).Seconds()
				t.Logf("build: %d of %d versions stored, %.0f/s", n, total, float64(n)/secs)
			}
		}
	}()
	return func() { close(stop); <-ended }
}

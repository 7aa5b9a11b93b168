package archive_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/logline"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
)

// fakeReplica notes, at each Sync, what the catalog and the bucket hold.
type fakeReplica struct {
	mu      sync.Mutex
	f       *packFixture
	fail    error
	pending []int // pending files in the catalog, at each Sync
	files   []int // pack files in the bucket, at each Sync
}

func (r *fakeReplica) Sync(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = append(r.pending, len(r.f.files(catalog.PackPending)))
	r.files = append(r.files, len(r.f.keys("parquet")))
	return r.fail
}

func (r *fakeReplica) Forget(ctx context.Context) error { return nil }

// TestPackFileReplicatedBeforePut: with a replica, a new pack file's
// pending row is in the replica before the file is in the bucket, so a
// catalog restored from the replica names every file a run left (pending
// or live) and start-up recovery adopts or deletes it; a file no restored
// row names would be kept forever as a backup's possible copy, and check
// would report it. When the replica does not take the row, the run writes
// no file and leaves no pending row.
func TestPackFileReplicatedBeforePut(t *testing.T) {
	srv := s3test.Start(t, "versitygw")
	f := newPackFixture(t, srv, time.Hour)
	rep := &fakeReplica{f: f}
	a, err := archive.New(archive.Config{Cat: f.a.Cat, Objects: f.hooks, Loc: catalog.InS3, Key: f.a.Key, MaxSize: 1 << 20,
		DefaultRetention: 30 * 24 * time.Hour, Now: f.clock.Now, Log: logline.New(f.log, "debug", "serve"),
		Parquet: &archive.ParquetOptions{PackLimit: 16 << 20, ReaderGrace: time.Hour, SpoolDir: t.TempDir()}, Replica: rep})
	if err != nil {
		t.Fatal(err)
	}
	f.a, f.p = a, a.Packer()

	f.store(3)
	rep.fail = errors.New("the target does not answer")
	if st := f.p.Run(f.ctx); st.Failed != 1 || st.Files != 0 {
		t.Fatalf("pack run with the replica failing: %+v", st)
	}
	if n := len(f.keys("parquet")); n != 0 {
		t.Fatalf("%d pack file(s) written that the replica never heard of", n)
	}
	if fs := f.files(catalog.PackPending); len(fs) != 0 {
		t.Fatalf("%d pending row(s) left by the refused run", len(fs))
	}
	if !strings.Contains(f.log.String(), "replica did not take") {
		t.Errorf("the log does not say why the run failed:\n%s", f.log.String())
	}

	rep.fail = nil
	rep.pending, rep.files = nil, nil
	f.run(1, 3)
	if len(rep.pending) != 1 || rep.pending[0] != 1 || rep.files[0] != 0 {
		t.Fatalf("at the replica's syncs: pending rows %v, files in the bucket %v; want one sync with the row recorded and no file yet", rep.pending, rep.files)
	}
	f.readAll()
}

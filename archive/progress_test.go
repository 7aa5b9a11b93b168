package archive_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/archivetest"
)

// counter is a progress callback that counts its calls and their bytes.
type counter struct {
	calls int
	bytes int64
}

func (c *counter) add(n int64) { c.calls++; c.bytes += n }

// TestProgressCallbacks: check (plain and deep, damaged versions too),
// MoveObjects and RotateMasterKey report every item they go through, as
// many as the catalog's counts that the progress lines take as totals.
func TestProgressCallbacks(t *testing.T) {
	ctx := context.Background()
	k := archivetest.Keyed(t, nil)
	cat, mk := k.Cat, k.Key
	dir, err := objstore.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := objstore.NewDir(t.TempDir()) // a folder stands in for the bucket
	if err != nil {
		t.Fatal(err)
	}
	local, err := archive.New(archive.Config{Cat: cat, Objects: dir, Loc: catalog.InDir, Key: mk, MaxSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var sealed int64
	var last catalog.Version
	for i, name := range []string{"acme", "acme", "acme", "globex", "globex"} {
		tenant, err := cat.FindTenant(ctx, name)
		if err != nil {
			if tenant, err = cat.NewTenant(ctx, name, catalog.CLI); err != nil {
				t.Fatal(err)
			}
		}
		u := ids.NewRandom()
		s, err := local.Store(ctx, archive.StoreRequest{Tenant: tenant.ID, Mode: catalog.CreateOnly,
			Body: bytes.NewReader(apitest.NewVcon(u.String(), "progress", "+15555550100")), ContentType: "application/vcon"})
		if err != nil {
			t.Fatalf("store %d: %v", i, err)
		}
		if last, err = cat.Version(ctx, s.Version); err != nil {
			t.Fatal(err)
		}
		sealed += last.SealedSize
	}
	tenants, err := cat.Tenants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check := func(deep bool, loc catalog.Location) (counter, int) {
		t.Helper()
		var c counter
		opt := archive.CheckOptions{Cat: cat, Key: mk, Deep: deep, Dir: dir, Bucket: bucket,
			ObjectsInBucket: loc == catalog.InS3, Checked: c.add}
		checker := archive.NewChecker(opt)
		damaged := 0
		for _, tn := range tenants {
			r, err := checker.Tenant(ctx, tn)
			if err != nil {
				t.Fatal(err)
			}
			damaged += len(r.Damaged)
		}
		return c, damaged
	}
	kept, err := cat.CountKept(ctx)
	if err != nil || kept != 5 {
		t.Fatalf("CountKept = %d, %v", kept, err)
	}
	for _, deep := range []bool{false, true} {
		if c, damaged := check(deep, catalog.InDir); c.calls != kept || c.bytes != sealed || damaged != 0 {
			t.Errorf("check deep=%v told %d versions of %d bytes (%d damaged), want %d of %d", deep, c.calls, c.bytes, damaged, kept, sealed)
		}
	}

	inDir, err := cat.CountAt(ctx, catalog.InDir)
	if err != nil {
		t.Fatal(err)
	}
	remote, err := archive.New(archive.Config{Cat: cat, Objects: bucket, Loc: catalog.InS3, Key: mk, MaxSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var moved counter
	st, err := remote.MoveObjects(ctx, dir, moved.add)
	if err != nil {
		t.Fatal(err)
	}
	if moved.calls != inDir || moved.calls != st.Moved || moved.bytes != st.Bytes || st.Bytes != sealed {
		t.Errorf("move-objects told %d objects of %d bytes; moved %+v, %d were in the data directory", moved.calls, moved.bytes, st, inDir)
	}

	// A damaged version is checked, and counted, too.
	if err := bucket.Delete(ctx, archive.ObjectKey(catalog.InS3, last.Tenant, last.ID)); err != nil {
		t.Fatal(err)
	}
	for _, deep := range []bool{false, true} {
		if c, damaged := check(deep, catalog.InS3); c.calls != kept || damaged != 1 {
			t.Errorf("check deep=%v with a lost object told %d versions (%d damaged), want %d (1)", deep, c.calls, damaged, kept)
		}
	}

	// The versions were stored under their tenant's key: a rotation
	// re-wraps the two tenants' keys, and moves no data key.
	newKey := archivetest.MasterKey(t, 8)
	told := 0
	n, err := archive.RotateMasterKey(ctx, cat, mk, newKey, "new.key", func(k int) { told += k })
	if err != nil {
		t.Fatal(err)
	}
	if told != 0 || n != 2 {
		t.Errorf("rotate moved %d data keys and re-wrapped %d tenant keys, want 0 and 2", told, n)
	}
}

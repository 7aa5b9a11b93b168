package parquet

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestReaderGraceOnServer: a reader that took the manifest before a merge
// can read every file it names, through the bucket, until reader_grace
// (900 s) has passed since the newer manifest; then the server deletes
// them, and the newest manifest names files that are all there. The
// server's clock is injected, so the test does not wait 15 minutes.
func TestReaderGraceOnServer(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t, "versitygw")
	clk := testenv.NewClock(time.Now().UTC())
	e := testenv.New(t, testenv.Options{Now: clk.Now, Storage: srv.StorageTOML(t, srv.NewBucket(t, false), "g/") + parquetTable(3600)})
	e.Daemon.PackRun(ctx)
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	post := func() {
		u := ids.NewRandom().String()
		if r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(u, "grace", "+15555550100"), "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("POST: %d", r.Status)
		}
	}
	post()
	post()
	e.Daemon.PackRun(ctx)
	post()
	e.Daemon.PackRun(ctx) // packs the third into a second file, merges the two
	s := e.Store()
	prefix := "tenants/" + tenant + "/"
	manifests := keys(t, s, prefix+"manifest/")
	if len(manifests) != 3 {
		t.Fatalf("manifests %v, want three", manifests)
	}
	// The reader's manifest: the one before the merge, naming two files.
	var old archive.Manifest
	if err := json.Unmarshal(get(t, s, manifests[1]), &old); err != nil || len(old.Files) != 2 {
		t.Fatalf("manifest before the merge: %+v %v", old, err)
	}
	readOld := func() error {
		for _, f := range old.Files {
			rc, err := s.Get(ctx, prefix+f.Path)
			if err != nil {
				return err
			}
			rc.Close()
		}
		return nil
	}
	for _, step := range []time.Duration{10 * time.Second, 500 * time.Second, 389 * time.Second} {
		clk.Advance(step)
		e.Daemon.PackRun(ctx)
		if err := readOld(); err != nil {
			t.Fatalf("a file of the older manifest within the grace: %v", err)
		}
	}
	clk.Advance(time.Second)
	e.Daemon.PackRun(ctx)
	if err := readOld(); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("the older manifest's files after the grace: %v", err)
	}
	manifests = keys(t, s, prefix+"manifest/")
	if len(manifests) != 1 {
		t.Fatalf("manifests after the grace: %v", manifests)
	}
	var m archive.Manifest
	if err := json.Unmarshal(get(t, s, manifests[0]), &m); err != nil || len(m.Files) != 1 || len(m.Live) != 3 {
		t.Fatalf("newest manifest: %+v %v", m, err)
	}
	if _, err := s.Stat(ctx, prefix+m.Files[0].Path); err != nil {
		t.Fatalf("the newest manifest's file: %v", err)
	}
	if files := keys(t, s, prefix+"parquet/"); len(files) != 1 {
		t.Fatalf("files after the grace: %v", files)
	}
}

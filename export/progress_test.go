package export_test

import (
	"context"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/export"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestExportProgress: Progress is told every version the export goes
// through, in one goroutine, as many as CountExport counted beforehand;
// their sealed sizes add up to the sealed bytes of the rows.
func TestExportProgress(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	d := storeEveryForm(t, e, "acme", 6)
	want := keptVersions(t, e, d.Tenant)
	tenant := findTenant(t, e, d.Tenant)
	ctx := context.Background()
	total, err := e.Daemon.Cat.CountExport(ctx, tenant.ID, time.Time{}, time.Time{})
	if err != nil || total != len(want) {
		t.Fatalf("CountExport = %d, %v; the tenant keeps %d versions", total, err, len(want))
	}
	var sizes int64
	for _, k := range want {
		v, err := e.Daemon.Cat.Version(ctx, k.ID)
		if err != nil {
			t.Fatal(err)
		}
		sizes += v.SealedSize
	}
	dst, err := export.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	calls, sealed := 0, int64(0)
	r, err := export.Run(ctx, export.Options{Archive: e.Daemon.Archive, Tenant: tenant, Target: dst, Workers: 3, Batch: 2,
		Progress: func(n int64) { calls++; sealed += n }}) // unsynchronized: -race proves one goroutine
	if err != nil {
		t.Fatal(err)
	}
	if calls != total || int64(calls) != r.Rows+r.Skipped || sealed != sizes {
		t.Errorf("Progress told %d versions of %d sealed bytes; the export wrote %d rows, skipped %d; CountExport said %d of %d bytes",
			calls, sealed, r.Rows, r.Skipped, total, sizes)
	}
}

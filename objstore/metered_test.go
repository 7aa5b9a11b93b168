package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/metrics"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/objstore/storetest"
	"github.com/vcon-server/vcon-server/test/kit/promtext"
)

// TestMeteredConformance runs the store suite through the decorator: it
// must keep every contract of the store it wraps.
func TestMeteredConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store {
		d, err := objstore.NewDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return objstore.NewMetered(d, metrics.NewRegistry())
	})
}

// failing fails the calls a test asks it to, and holds a body that breaks
// after its first bytes.
type failing struct {
	objstore.Store
	fail map[string]error
}

func (f *failing) Stat(ctx context.Context, key string) (objstore.Info, error) {
	if err := f.fail["stat"]; err != nil {
		return objstore.Info{}, err
	}
	return f.Store.Stat(ctx, key)
}

func (f *failing) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := f.fail["get-body"]; err != nil {
		return io.NopCloser(io.MultiReader(strings.NewReader("abc"), errReader{err})), nil
	}
	return f.Store.Get(ctx, key)
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestMeteredCounts(t *testing.T) {
	ctx := context.Background()
	d, err := objstore.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &failing{Store: d, fail: map[string]error{}}
	reg := metrics.NewRegistry()
	m := objstore.NewMetered(f, reg)

	tenantKey := "objects/0191b2c3-aaaa-7bbb-8ccc-123456789abc/0191b2c3-dddd-7eee-8fff-123456789abc"
	if err := objstore.Put(ctx, m, tenantKey, strings.NewReader("sealed"), true); err != nil {
		t.Fatal(err)
	}
	if err := objstore.Put(ctx, m, tenantKey, strings.NewReader("again"), true); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("create-only put over a taken name: %v", err)
	}
	u, err := m.Upload(ctx, "objects/x/abandoned", false)
	if err != nil {
		t.Fatal(err)
	}
	u.Write([]byte("half"))
	u.Abort()
	u.Abort() // counted once

	rc, err := m.Get(ctx, tenantKey)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, rc)
	rc.Close()
	rc.Close()
	rc, err = m.GetRange(ctx, tenantKey, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(rc); string(b) != "ea" {
		t.Fatalf("range read %q", b)
	}
	rc.Close()
	if _, err := m.Get(ctx, "objects/x/missing"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatal(err)
	}
	f.fail["get-body"] = errors.New("connection reset")
	rc, _ = m.Get(ctx, tenantKey)
	if _, err := io.ReadAll(rc); err == nil {
		t.Fatal("the broken body read whole")
	}
	rc.Close()

	if _, err := m.Stat(ctx, tenantKey); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(ctx, tenantKey); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Stat(ctx, tenantKey); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatal(err)
	}
	f.fail["stat"] = errors.New("s3: head object: 503 SlowDown")
	m.Stat(ctx, tenantKey)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	f.fail["stat"] = cctx.Err()
	m.Stat(cctx, tenantKey)

	stop := errors.New("stop")
	objstore.Put(ctx, m, "objects/x/a", bytes.NewReader(nil), false)
	if err := m.List(ctx, "objects/", func(objstore.Info) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("list: %v", err)
	}
	if n, err := m.RemoveStaleTemps(time.Hour); err != nil || n != 0 {
		t.Fatalf("RemoveStaleTemps through the decorator: %d %v", n, err)
	}
	if m.Unwrap() != objstore.Store(f) || m.String() != d.String() {
		t.Fatal("Unwrap or String does not name the wrapped store")
	}

	var b strings.Builder
	reg.Write(&b)
	page := b.String()
	fams, err := promtext.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatalf("%v\n%s", err, page)
	}
	want := map[[2]string]float64{
		{"put", "ok"}: 2, {"put", "exists"}: 1, {"put", "aborted"}: 1, {"put", "error"}: 0,
		{"get", "ok"}: 1, {"get", "not_found"}: 1, {"get", "error"}: 1,
		{"get_range", "ok"}: 1,
		{"stat", "ok"}:      1, {"stat", "not_found"}: 1, {"stat", "error"}: 1, {"stat", "canceled"}: 1,
		{"delete", "ok"}: 1, {"list", "ok"}: 1, {"list", "error"}: 0,
	}
	for k, n := range want {
		got, ok := fams.Value("vcon_objstore_requests_total", "call", k[0], "outcome", k[1])
		if !ok || got != n {
			t.Errorf("%s/%s = %v (present %v), want %v", k[0], k[1], got, ok, n)
		}
	}
	if got := fams.Sum("vcon_objstore_request_duration_seconds_count", "call", "stat"); got != 4 {
		t.Errorf("stat timed %v times, want 4", got)
	}
	if strings.Contains(page, "0191b2c3") || strings.Contains(page, "objects/") {
		t.Errorf("a key reached a label:\n%s", page)
	}
}

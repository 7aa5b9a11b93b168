package cli_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
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
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// fill stores n versions into e's data directory through the archive's
// own Store, from several goroutines so that their commits share fsyncs
// (group commit), with the server stopped. It returns the tenant's id.
func fill(t testing.TB, e *testenv.Env, n int) ids.ID {
	t.Helper()
	ctx := context.Background()
	tenant := ids.MustParse(e.Tenant("acme"))
	mk, err := seal.LoadMasterKey(e.Config.MasterKey)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Open(ctx, e.Config.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	dir, err := objstore.NewDir(e.Config.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := archive.New(archive.Config{Cat: cat, Objects: dir, Loc: catalog.InDir, Key: mk, MaxSize: 1 << 20, DefaultRetention: 30 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) && failed.Load() == nil {
				body := apitest.NewVcon(ids.NewRandom().String(), "fill", "+15555550100")
				_, err := a.Store(ctx, archive.StoreRequest{Tenant: tenant, Mode: catalog.CreateOnly, Body: bytes.NewReader(body), ContentType: "application/vcon"})
				if err != nil {
					failed.Store(err)
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	return tenant
}

// startToHealth starts the server in this process and returns how long it
// took until GET /health answered 200.
func startToHealth(t testing.TB, e *testenv.Env) time.Duration {
	t.Helper()
	began := time.Now()
	e.Start()
	for {
		if r := e.Do("GET", "/health", "", nil); r.Status == 200 {
			return time.Since(began)
		}
		if time.Since(began) > 5*time.Minute {
			t.Fatal("no /health in 5 minutes")
		}
		time.Sleep(time.Millisecond)
	}
}

// idAt makes a version id of time t, as a store made at t would.
func idAt(t time.Time) ids.ID {
	id := ids.NewRandom()
	ms := uint64(t.UnixMilli())
	for i := 5; i >= 0; i-- {
		id[i] = byte(ms)
		ms >>= 8
	}
	id[6] = 0x70 | id[6]&0x0f
	return id
}

// TestStartupLook: objects no row names are removed by the look that runs
// once the server answers, when their version id is older than the start;
// an object whose id is younger (a store in flight) stays. So are the
// temporary files a killed write left, by their modification time.
func TestStartupLook(t *testing.T) {
	e := testenv.Prepare(t, testenv.Options{})
	tenant := fill(t, e, 2)
	dir, err := objstore.NewDir(e.Config.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	put := func(v ids.ID) string {
		key := archive.ObjectKey(catalog.InDir, tenant, v)
		if err := objstore.Put(ctx, dir, key, strings.NewReader("sealed bytes no key opens"), true); err != nil {
			t.Fatal(err)
		}
		return key
	}
	old := put(idAt(time.Now().Add(-time.Hour)))
	young := put(idAt(time.Now().Add(time.Hour)))
	folder := filepath.Dir(filepath.Join(e.Config.DataDir, filepath.FromSlash(old)))
	temp := func(name string, mtime time.Time) string {
		p := filepath.Join(folder, name)
		if err := os.WriteFile(p, []byte("cut"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return p
	}
	killed := temp(".tmp-killed", time.Now().Add(-time.Hour))
	writing := temp(".tmp-writing", time.Now().Add(time.Hour))
	startToHealth(t, e)
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(e.Log.String(), "storage look temporary_files=1 orphan_objects=1 packed_objects_removed=0 objects=4 tenants=1 done=true") {
		if time.Now().After(deadline) {
			t.Fatalf("no look removed the orphan:\n%s", e.Log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := dir.Stat(ctx, old); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("the orphan older than the start: %v", err)
	}
	if _, err := dir.Stat(ctx, young); err != nil {
		t.Fatalf("the object younger than the start: %v", err)
	}
	if _, err := os.Stat(killed); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the temporary file older than the start: %v", err)
	}
	if _, err := os.Stat(writing); err != nil {
		t.Fatalf("the temporary file younger than the start: %v", err)
	}
	if strings.Contains(e.Log.String(), tenant.String()) {
		t.Fatal("the log names the tenant")
	}
}

// TestStartupScale measures the start until /health answers with nothing
// pending, at the sizes VCON_STARTUP_SIZES names (versions on the data
// directory, comma separated), the median of three starts each:
//
//	VCON_STARTUP_SIZES=20000,100000 go test -count=1 -run TestStartupScale -v ./cli
func TestStartupScale(t *testing.T) {
	sizes := os.Getenv("VCON_STARTUP_SIZES")
	if sizes == "" {
		t.Skip("set VCON_STARTUP_SIZES (e.g. 20000,100000) to measure")
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			t.Fatal(err)
		}
		e := testenv.Prepare(t, testenv.Options{})
		began := time.Now()
		fill(t, e, n)
		t.Logf("versions=%d filled in %s", n, time.Since(began).Round(time.Millisecond))
		var took []time.Duration
		for i := 0; i < 3; i++ {
			took = append(took, startToHealth(t, e))
			e.Stop()
		}
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		t.Logf("versions=%d start-to-health median=%s (runs %v)", n, took[1].Round(time.Millisecond), took)
		// The look at every object, which the start left to the
		// background: how long its pass takes after /health answered.
		looks := strings.Count(e.Log.String(), "storage look ")
		health := startToHealth(t, e)
		began = time.Now()
		for strings.Count(e.Log.String(), "storage look ") == looks {
			if time.Since(began) > 10*time.Minute {
				t.Fatal("no look in 10 minutes")
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Logf("versions=%d start-to-health=%s, then the look's pass in %s", n, health.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
		e.Stop()
	}
}

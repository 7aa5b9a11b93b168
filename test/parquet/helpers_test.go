package parquet

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/parquetstore"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// parquetTable is a [storage.parquet] table with the given pack_interval.
func parquetTable(interval int) string {
	return "\n[storage.parquet]\npack_interval = " + strconv.Itoa(interval) + "\n"
}

// seedVcon is the vCon the documentation stores, with its uuid.
func seedVcon(uuid string) []byte {
	return []byte(`{"vcon":"0.4.0","uuid":"` + uuid + `","created_at":"2026-11-06T12:00:00Z","subject":"Packed example","parties":[{"tel":"+15555550102","name":"Packed Example"}],"dialog":[],"attachments":[],"analysis":[]}`)
}

// keys lists the bucket's keys under prefix.
func keys(t testing.TB, s objstore.Store, prefix string) []string {
	t.Helper()
	var out []string
	if err := s.List(context.Background(), prefix, func(i objstore.Info) error { out = append(out, i.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// countObjects counts the objects of every tenant (tenants/*/objects/*).
func countObjects(t testing.TB, s objstore.Store) int {
	n := 0
	for _, k := range keys(t, s, "tenants/") {
		if strings.Contains(k, "/objects/") {
			n++
		}
	}
	return n
}

// waitFor polls cond every 100 ms until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func get(t testing.TB, s objstore.Store, key string) []byte {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// download copies every object under prefix into dir, keeping the key
// layout, so DuckDB reads the files as it would in the bucket: the test
// host cannot download DuckDB's httpfs extension.
func download(t testing.TB, s objstore.Store, prefix, dir string) {
	t.Helper()
	for _, k := range keys(t, s, prefix) {
		p := filepath.Join(dir, filepath.FromSlash(k))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, get(t, s, k), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func openCatalog(t testing.TB, e *testenv.Env) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.Open(context.Background(), e.Config.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// packRows reads the version ids of every row of the pack file at key.
func packRows(t testing.TB, s objstore.Store, key string) []ids.ID {
	t.Helper()
	b := get(t, s, key)
	var out []ids.ID
	err := parquetstore.ReadPackRows(bytes.NewReader(b), int64(len(b)), func(v ids.ID, _ time.Time, _ parquetstore.Location) error {
		out = append(out, v)
		return nil
	})
	if err != nil {
		t.Fatalf("read the pack file: %v", err)
	}
	return out
}

// checkBucket checks what the bucket holds against the catalog of a
// stopped server: every pack file is one the catalog records live or
// retired (no orphan, nothing pending or half deleted), every live file
// holds exactly the rows the catalog places in it, no object remains of a
// packed version, and no file holds a row of a version the catalog no
// longer has (a purged version never comes back).
func checkBucket(t testing.TB, e *testenv.Env, s objstore.Store) {
	t.Helper()
	ctx := context.Background()
	cat := openCatalog(t, e)
	defer cat.Close()
	files, err := cat.PackFilesIn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]catalog.PackFile{}
	for _, f := range files {
		if f.State != catalog.PackLive && f.State != catalog.PackRetired {
			t.Fatalf("a pack file is %s after recovery", f.State)
		}
		known[f.Key] = f
	}
	for _, k := range keys(t, s, "tenants/") {
		switch {
		case strings.Contains(k, "/parquet/"):
			f, ok := known[k]
			if !ok {
				t.Fatalf("orphan pack file %s: no catalog row names it", k)
			}
			rows := packRows(t, s, k)
			for _, v := range rows {
				if ok, _ := cat.Exists(ctx, v); !ok {
					t.Fatalf("%s holds a row of version %s, which the catalog no longer has", k, v)
				}
			}
			if f.State == catalog.PackLive {
				want, err := cat.PackRows(ctx, f.ID)
				if err != nil {
					t.Fatal(err)
				}
				if len(want) != len(rows) {
					t.Fatalf("%s holds %d rows, the catalog places %d there", k, len(rows), len(want))
				}
			}
			delete(known, k)
		case strings.Contains(k, "/objects/"):
			id, err := ids.Parse(k[strings.LastIndexByte(k, '/')+1:])
			if err != nil {
				t.Fatal(err)
			}
			v, err := cat.Version(ctx, id)
			if err != nil {
				t.Fatalf("object %s: %v", k, err)
			}
			if v.Location != catalog.InS3 {
				t.Fatalf("an object remains of a %s version", v.Location)
			}
		}
	}
	for k := range known {
		t.Fatalf("the catalog records %s, which the bucket does not hold", k)
	}
	var purging int
	cat.DB().QueryRow(`SELECT count(*) FROM versions WHERE purge <> 0`).Scan(&purging)
	if purging != 0 {
		t.Fatalf("%d purges unfinished after recovery", purging)
	}
}

package replica

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRolloverScale measures what a purge's rollover costs as the catalog
// grows, against the whole generation the same catalog needs:
//
//	VCON_REPLICA_SCALE=100000,1000000 go test -run TestRolloverScale -v -timeout 60m ./replica/
//
// Each size: a catalog of n versions (with their vCons and audit records),
// its first generation, 200 segments of 8 new versions each, then rounds
// of 1,000 new versions and one purged key followed by the purge's
// rollover, then a restore. Never part of make test.
func TestRolloverScale(t *testing.T) {
	sizes := os.Getenv("VCON_REPLICA_SCALE")
	if sizes == "" {
		t.Skip("skipped: set VCON_REPLICA_SCALE=100000,1000000")
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(s, func(t *testing.T) { rolloverAt(t, n) })
	}
}

func rolloverAt(t *testing.T, n int) {
	f := newFixture(t)
	start := time.Now()
	var vs [][16]byte
	for done := 0; done < n; done += 10000 {
		for _, v := range f.add(min(10000, n-done)) {
			vs = append(vs, v)
		}
	}
	t.Logf("n=%d: catalog made in %s", n, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	if err := f.rep.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	full := time.Since(start)
	fullBytes := f.rep.Status().Bytes
	t.Logf("n=%d: first (whole) generation %s, %d bytes, %d objects", n, full.Round(time.Millisecond), fullBytes, len(f.keys()))
	// A segment's cost grows with what it carries, not with the catalog:
	// the step of a max_lag = 0 write, 8 versions a segment.
	var cut time.Duration
	const cuts = 200
	for range cuts {
		f.add(8)
		start = time.Now()
		if err := f.rep.Sync(f.ctx); err != nil {
			t.Fatal(err)
		}
		cut += time.Since(start)
	}
	t.Logf("n=%d: a segment of 8 versions: %s each", n, (cut / cuts).Round(time.Microsecond))
	for round := range 3 {
		f.add(1000)
		if err := f.rep.Sync(f.ctx); err != nil {
			t.Fatal(err)
		}
		v := vs[(round+1)*len(vs)/5]
		f.exec(f.cat.DB(), `UPDATE versions SET wrapped_key = NULL, purge = 1 WHERE id = ?`, v[:])
		before := f.rep.Status().Bytes
		start = time.Now()
		if err := f.rep.Forget(f.ctx); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		t.Logf("n=%d: purge rollover %d: %s (%.3f of the whole generation's time), %d bytes written (%.4f of its bytes)",
			n, round+1, took.Round(time.Millisecond), took.Seconds()/full.Seconds(), f.rep.Status().Bytes-before,
			float64(f.rep.Status().Bytes-before)/float64(fullBytes))
	}
	start = time.Now()
	res, err := Restore(f.ctx, f.store, f.key, filepath.Join(t.TempDir(), "restored.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("n=%d: restore %s (%d shards, %d segments, %d rows)", n, time.Since(start).Round(time.Millisecond), res.Shards, res.Segments, res.Rows)
}

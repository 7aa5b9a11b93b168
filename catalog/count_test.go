package catalog

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
)

// TestCounts: the counts of the progress lines match what the long
// commands then go through: the versions at a location (EachAt), the
// keys a rotation re-wraps, the versions an export lists in a window.
func TestCounts(t *testing.T) {
	ctx := context.Background()
	mk := masterKey(t, 1)
	c, _, err := Create(ctx, t.TempDir(), mk.CheckValue())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fill(t, c, mk, 25) // every tenth purged: 23 keys kept
	tenant, err := c.FindTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}

	at := 0
	if err := c.EachAt(ctx, InDir, func(Version) error { at++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n, err := c.CountAt(ctx, InDir); err != nil || n != at || n != 25 {
		t.Errorf("CountAt(InDir) = %d, %v; EachAt went through %d, fill stored 25", n, err, at)
	}
	if n, err := c.CountAt(ctx, InS3); err != nil || n != 0 {
		t.Errorf("CountAt(InS3) = %d, %v; want 0", n, err)
	}

	if n, err := c.CountWrappedKeys(ctx); err != nil || n != len(wrappedKeys(t, c)) || n != 23 {
		t.Errorf("CountWrappedKeys = %d, %v; the catalog holds %d keys", n, err, len(wrappedKeys(t, c)))
	}

	newest, _, err := c.NewestVersion(ctx, tenant.ID)
	if err != nil {
		t.Fatal(err)
	}
	listed := func(since, until time.Time) int {
		page, err := c.ExportPage(ctx, tenant.ID, ids.ID{}, newest, since, until, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return len(page)
	}
	all := listed(time.Time{}, time.Time{})
	if n, err := c.CountExport(ctx, tenant.ID, time.Time{}, time.Time{}); err != nil || n != all || n != 23 {
		t.Errorf("CountExport of every time = %d, %v; ExportPage lists %d", n, err, all)
	}
	var mid time.Time
	if err := c.EachKept(ctx, tenant.ID, func(v Version) error {
		if mid.IsZero() || v.StoredAt.Before(mid) {
			mid = v.StoredAt
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mid = mid.Add(time.Nanosecond) // after the first version only
	for _, w := range [][2]time.Time{{mid, {}}, {{}, mid}, {time.Now().Add(time.Hour), {}}} {
		want := listed(w[0], w[1])
		if n, err := c.CountExport(ctx, tenant.ID, w[0], w[1]); err != nil || n != want {
			t.Errorf("CountExport(%v, %v) = %d, %v; ExportPage lists %d", w[0], w[1], n, err, want)
		}
	}
	if n, err := c.CountExport(ctx, ids.ID{1}, time.Time{}, time.Time{}); err != nil || n != 0 {
		t.Errorf("CountExport of another tenant = %d, %v", n, err)
	}
}

// TestCountPlans: each count is answered by indexes, reading no row of
// versions but the purging ones (the partial index versions_purging).
func TestCountPlans(t *testing.T) {
	ctx := context.Background()
	c, _, err := Create(ctx, t.TempDir(), masterKey(t, 1).CheckValue())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, q := range []string{qCountAt, qCountWrappedKeys, qCountExport} {
		args := make([]any, strings.Count(q, "?"))
		for i := range args {
			args[i] = 1
		}
		rows, err := c.DB().Query("EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(detail, "versions") && !strings.Contains(detail, "COVERING INDEX") && !strings.Contains(detail, "versions_purging") {
				t.Errorf("%s\nreads rows: %s", q, detail)
			}
		}
		rows.Close()
	}
}

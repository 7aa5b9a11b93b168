package catalog

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
)

// BenchmarkEachKept pages through every kept version of a tenant of n
// versions, for each n of VCON_SCAN_N (comma-separated; default 20000 and
// 100000), reporting the time per version: it stays flat as n grows when
// each page is a range read of an index in id order (docs/FORMAT.md, "The
// catalog"), and grows with n when a page sorts the whole tenant.
func BenchmarkEachKept(b *testing.B) {
	sizes := "20000,100000"
	if s := os.Getenv("VCON_SCAN_N"); s != "" {
		sizes = s
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatalf("VCON_SCAN_N: %v", err)
		}
		b.Run(s, func(b *testing.B) {
			ctx := context.Background()
			c, _, err := Create(ctx, b.TempDir(), masterKey(b, 1).CheckValue())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			fill(b, c, masterKey(b, 1), n)
			t, err := c.FindTenant(ctx, "acme")
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			kept := 0
			for i := 0; i < b.N; i++ {
				kept = 0
				if err := c.EachKept(ctx, t.ID, func(Version) error { kept++; return nil }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*kept), "ns/version")
		})
	}
}

// TestCursors pages through the purges due and a day's objects to pack a
// few at a time: each page goes on from the last, the pages together are
// what one page takes, and a pack page comes in version order.
func TestCursors(t *testing.T) {
	ctx := context.Background()
	c, _, err := Create(ctx, t.TempDir(), masterKey(t, 1).CheckValue())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f := fillPlans(t, c)

	all, _, err := c.PurgeDue(ctx, 0, f.now, DueCursor{}, 1<<20)
	if err != nil || len(all) < 50 {
		t.Fatalf("%d purges due: %v", len(all), err)
	}
	var paged []ids.ID
	for after := (DueCursor{}); ; {
		page, next, err := c.PurgeDue(ctx, 0, f.now, after, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		paged, after = append(paged, page...), next
	}
	if !slices.Equal(paged, all) {
		t.Fatalf("%d purges due page by page, %d in one page", len(paged), len(all))
	}

	tenant := f.tenant
	from, to := f.day, f.day.AddDate(0, 0, 1)
	one, _, err := c.Packable(ctx, tenant, from, to, 1<<20, PackCursor{}, 1<<40, 1<<20)
	if err != nil || len(one) < 5 {
		t.Fatalf("%d objects to pack: %v", len(one), err)
	}
	seen := map[ids.ID]bool{}
	for after := (PackCursor{}); ; {
		page, next, err := c.Packable(ctx, tenant, from, to, 1<<20, after, 3*150, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 3 || !slices.IsSortedFunc(page, func(a, b PackCandidate) int { return bytes.Compare(a.ID[:], b.ID[:]) }) {
			t.Fatalf("a page of %d objects to pack, not 3 at most in version order", len(page))
		}
		for _, p := range page {
			if seen[p.ID] || p.StoredAt.Before(from) || !p.StoredAt.Before(to) {
				t.Fatalf("object %s stored %s listed twice or outside the day", p.ID, p.StoredAt)
			}
			seen[p.ID] = true
		}
		after = next
	}
	if len(seen) != len(one) {
		t.Fatalf("%d objects to pack page by page, %d in one page", len(seen), len(one))
	}
}

package catalog

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLeafIsJSON holds Leaf's fast path to encoding/json's bytes.
func TestLeafIsJSON(t *testing.T) {
	at := time.Date(2026, 12, 1, 23, 50, 19, 120000000, time.UTC)
	for _, r := range []Record{
		{Time: at, Actor: "key:ab", Label: "ingest", Action: "store", Target: "019ad2c4-7a1e-7cc3-9a55-3d2f1e0b7c11", Status: 201},
		{Time: at, Actor: "server", Label: "retention", Action: "purge", Target: "019ad2c4-7a1e-7cc3-9a55-3d2f1e0b7c11", Status: 200},
		{Time: at, Tenant: "t", Actor: "cli", Action: "tenant_create", Status: 200},
		{Time: at, Actor: "key:ab", Label: `a "label" <b> & ü \ ` + "\x01", Action: "read", Status: 404},
	} {
		want, _ := json.Marshal(leafJSON{Index: 7, Time: r.Time.Format(time.RFC3339Nano), Tenant: r.Tenant, Actor: r.Actor,
			Label: r.Label, Action: r.Action, Lifecycle: Lifecycle(r), Target: r.Target, Status: r.Status})
		if got := Leaf(7, r); string(got) != string(want) || (r.Status == 201 && !strings.Contains(string(got), `"lifecycle":"vcon_created"`)) {
			t.Errorf("Leaf %s, encoding/json %s", got, want)
		}
	}
}

// TestAuditTimeRanges: a record stored while the clock went back takes
// its predecessor's time, so a log's times never decrease and a time
// range is a span of its indexes; the ranges read what a filter of the
// whole log keeps, in index order, and a log noted audit_unordered is
// read whole.
func TestAuditTimeRanges(t *testing.T) {
	ctx := context.Background()
	c, tn := withTenant(t, t.TempDir())
	base := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	// Seconds from base of each record's clock: steps back twice.
	clock := []int{0, 1, 1, 2, 5, 3, 4, 6, 7, 7, 2, 9, 10}
	for i, s := range clock {
		c.Now = func() time.Time { return base.Add(time.Duration(s) * time.Second) }
		if err := c.Audit(ctx, tn.ID, Record{Actor: "cli", Action: "read", Target: strconv.Itoa(i), Status: 200}); err != nil {
			t.Fatal(err)
		}
	}
	var all []Record
	if err := c.AuditRecords(ctx, tn.ID, time.Time{}, time.Time{}, func(r Record) error { all = append(all, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(all) != len(clock) {
		t.Fatalf("%d records, want %d", len(all), len(clock))
	}
	for i, r := range all {
		want := clock[i]
		for _, s := range clock[:i] {
			want = max(want, s)
		}
		if r.Target != strconv.Itoa(i) || !r.Time.Equal(base.Add(time.Duration(want)*time.Second)) {
			t.Errorf("record %d: target %s at %v, want at +%ds", i, r.Target, r.Time, want)
		}
	}
	check := func(unordered bool) {
		t.Helper()
		for lo := -1; lo <= 11; lo++ {
			for hi := lo; hi <= 12; hi++ {
				since, until := base.Add(time.Duration(lo)*time.Second), base.Add(time.Duration(hi)*time.Second)
				if lo == -1 {
					since = time.Time{}
				}
				if hi == 12 {
					until = time.Time{}
				}
				var want, got []string
				for _, r := range all {
					if (since.IsZero() || !r.Time.Before(since)) && (until.IsZero() || r.Time.Before(until)) {
						want = append(want, r.Target)
					}
				}
				if err := c.AuditRecords(ctx, tn.ID, since, until, func(r Record) error { got = append(got, r.Target); return nil }); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Errorf("unordered %v, [+%ds, +%ds): %v, want %v", unordered, lo, hi, got, want)
				}
			}
		}
	}
	check(false)
	// A log an earlier release wrote while the clock went back, as
	// migration 19 finds it.
	if _, err := c.db.Exec(`UPDATE audit SET at = at - 3000000000 WHERE target = '6'; CREATE INDEX audit_by_tenant ON audit (tenant, at)`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.db.Exec(migrations[18]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Meta(ctx, "audit_unordered"); err != nil {
		t.Fatalf("migration 19 did not note the log unordered: %v", err)
	}
	all = all[:0]
	if err := c.AuditRecords(ctx, tn.ID, time.Time{}, time.Time{}, func(r Record) error { all = append(all, r); return nil }); err != nil {
		t.Fatal(err)
	}
	check(true)
}

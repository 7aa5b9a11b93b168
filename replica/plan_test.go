package replica

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/vcon-server/vcon-server/catalog"
)

// The plan of a rollover (docs/FORMAT.md, "Replica rollover", step 3) is
// made from the record, the tables and the changed keys alone: these tests
// need no store and no catalog.

var (
	planVersions = catalog.RepTable{Name: "versions", Cols: []string{"id", "wrapped_key"}, Key: []int{0}}
	planTenants  = catalog.RepTable{Name: "tenants", Cols: []string{"id", "name"}, Key: []int{0}}
)

// planShards returns n shards of versions whose ranges start at 0, 100,
// 200…: the first one open below.
func planShards(t *testing.T, n int) []shard {
	t.Helper()
	out := make([]shard, n)
	for i := range out {
		out[i].Key = "shard-" + string(rune('a'+i))
		if i > 0 {
			lo, err := encodeKey([]any{int64(100 * i)})
			if err != nil {
				t.Fatal(err)
			}
			out[i].Lo = lo
		}
	}
	return out
}

// stepsOf describes a table's plan: "keep <key>", or "cut [lo, hi)" with
// - for an open end.
func stepsOf(t *testing.T, tp tablePlan) []string {
	t.Helper()
	var out []string
	for _, s := range tp.steps {
		if s.keep != nil {
			out = append(out, "keep "+s.keep.Key)
			continue
		}
		bound := func(k []any) string {
			if k == nil {
				return "-"
			}
			return fmt.Sprint(k[0])
		}
		if (s.bound == nil) != (s.lo == nil) {
			t.Errorf("a range cut again from %v keeps the bound %v", s.lo, s.bound)
		}
		out = append(out, fmt.Sprintf("cut [%s, %s)", bound(s.lo), bound(s.hi)))
	}
	return out
}

func planOf(t *testing.T, pl *planner, seq int64) rolloverPlan {
	t.Helper()
	p, err := pl.plan(seq)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPlanCompactCutsOnlyChangedShards: a compaction cuts again the
// shards holding a changed key, keeps the others, and names seq as base.
func TestPlanCompactCutsOnlyChangedShards(t *testing.T) {
	st := &state{Base: 7, Tables: []table{{RepTable: planVersions, Shards: planShards(t, 4)}, {RepTable: planTenants}}}
	pl := newPlanner(compact, st, []catalog.RepTable{planVersions, planTenants})
	for _, k := range []int64{150, 199, 350} {
		if err := pl.changedKey("versions", []any{k, "ignored past the key"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pl.changedKey("not_replicated", []any{int64(1)}); err != nil {
		t.Fatal(err)
	}
	p := planOf(t, pl, 9)
	if p.base != 9 {
		t.Errorf("base %d, want the change number read at, 9", p.base)
	}
	want := []string{"keep shard-a", "cut [100, 200)", "keep shard-c", "cut [300, -)"}
	if got := stepsOf(t, p.tables[0]); !reflect.DeepEqual(got, want) || p.tables[0].whole {
		t.Errorf("versions: %q (whole %v), want %q", got, p.tables[0].whole, want)
	}
	if len(p.tables[1].steps) != 0 {
		t.Errorf("tenants, empty and unchanged: %q, want nothing written", stepsOf(t, p.tables[1]))
	}
}

// TestPlanForgetCutsWhatHeldASecret: a purge's rollover cuts again only
// the shards of a row whose secret column is now NULL or that is gone,
// and keeps the old base (its fold starts there).
func TestPlanForgetCutsWhatHeldASecret(t *testing.T) {
	st := &state{Base: 7, Tables: []table{{RepTable: planVersions, Shards: planShards(t, 3)}, {RepTable: planTenants, Shards: planShards(t, 1)}}}
	pl := newPlanner(forget, st, []catalog.RepTable{planVersions, planTenants})
	changes := []struct {
		t   catalog.RepTable
		key int64
		row []any
	}{
		{planVersions, 50, []any{int64(50), []byte("still wrapped")}}, // kept
		{planVersions, 120, []any{int64(120), nil}},                   // key destroyed
		{planVersions, 250, nil},                                      // row gone
		{planTenants, 10, nil},                                        // no secret column
	}
	for _, c := range changes {
		if err := pl.changed(c.t, []any{c.key}, c.row); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(pl.watched, map[string]catalog.RepTable{"versions": planVersions, "tenants": planTenants}) {
		t.Errorf("the fold carries %v, want both tables", pl.watched)
	}
	p := planOf(t, pl, 9)
	if p.base != 7 {
		t.Errorf("base %d, want the old base 7: the fold covers 8..9", p.base)
	}
	if got, want := stepsOf(t, p.tables[0]), []string{"keep shard-a", "cut [100, 200)", "cut [200, -)"}; !reflect.DeepEqual(got, want) {
		t.Errorf("versions: %q, want %q", got, want)
	}
	if got, want := stepsOf(t, p.tables[1]), []string{"keep shard-a"}; !reflect.DeepEqual(got, want) {
		t.Errorf("tenants: %q, want %q", got, want)
	}
}

// TestPlanCutsWhole: a full generation, a table new or changed in shape,
// a table that held nothing and changed, and a record whose log starts
// after base each cut a table anew, as one range.
func TestPlanCutsWhole(t *testing.T) {
	wider := catalog.RepTable{Name: "versions", Cols: []string{"id", "wrapped_key", "size"}, Key: []int{0}}
	cases := []struct {
		name  string
		mode  rolloverMode
		st    *state
		now   catalog.RepTable
		empty bool // the table held no shard
	}{
		{"full", full, &state{}, planVersions, false},
		{"new table", compact, &state{}, planVersions, false},
		{"changed shape", compact, &state{}, wider, false},
		{"log after base", compact, &state{Base: 3, LogFrom: 5}, planVersions, false},
		{"held nothing", compact, &state{}, planVersions, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name != "new table" {
				var shards []shard
				if !c.empty {
					shards = planShards(t, 3)
				}
				c.st.Tables = []table{{RepTable: planVersions, Shards: shards}}
			}
			pl := newPlanner(c.mode, c.st, []catalog.RepTable{c.now})
			if err := pl.changed(c.now, []any{int64(150)}, nil); err != nil {
				t.Fatal(err)
			}
			p := planOf(t, pl, 9)
			tp := p.tables[0]
			if got := stepsOf(t, tp); !tp.whole || !reflect.DeepEqual(got, []string{"cut [-, -)"}) || tp.RepTable.Name != "versions" {
				t.Errorf("%q (whole %v), want the whole table cut as one range", got, tp.whole)
			}
			if p.base != 9 {
				t.Errorf("base %d, want 9", p.base)
			}
		})
	}
}

// TestPlanRefusesACorruptBound: a shard bound the record cannot decode
// fails the plan, before anything is written.
func TestPlanRefusesACorruptBound(t *testing.T) {
	shards := planShards(t, 2)
	shards[1].Lo = []byte{0xff}
	st := &state{Tables: []table{{RepTable: planVersions, Shards: shards}}}
	pl := newPlanner(compact, st, []catalog.RepTable{planVersions})
	if err := pl.changed(planVersions, []any{int64(5)}, nil); err == nil {
		t.Fatal("a changed key was placed among bounds that do not decode")
	}
	pl.cut["versions"][1] = true
	if _, err := pl.plan(9); err == nil {
		t.Fatal("planned a range whose bound does not decode")
	}
}

package replica

import "github.com/vcon-server/vcon-server/catalog"

// A rollover decides before it writes (docs/FORMAT.md, "Replica rollover",
// step 3) which shards of the current generation it keeps, which ranges
// it cuts again and which base the new manifest names. The decision reads
// nothing but the record, the catalog's tables and the keys changed since
// base, so it is made and tested without a store; rollover carries it
// out, in the order of that section.

// rolloverPlan is what a rollover writes besides its fold and manifest.
type rolloverPlan struct {
	base   int64 // the base the new manifest and record name
	tables []tablePlan
}

// tablePlan is one table's shards in the new generation.
type tablePlan struct {
	catalog.RepTable
	// whole: the table is cut anew, as one range. Else its steps keep or
	// cut again each shard of the current generation, and the first shard
	// written takes what lies below all (its Lo is cleared).
	whole bool
	steps []shardStep // in key order; none: the table held nothing and nothing changed
}

// shardStep keeps one shard of the current generation (keep set) or cuts
// one range of rows again.
type shardStep struct {
	keep   *shard
	lo, hi []any  // the range, [lo, hi); nil is open
	bound  []byte // the range's Lo, kept even if its first row went; nil for the first range
}

// planner gathers a rollover's plan: made from the record and the tables
// the catalog holds now, told each key changed since base, then asked for
// the plan at the change number the rollover reads at.
type planner struct {
	mode    rolloverMode
	base    int64
	now     []catalog.RepTable
	old     map[string][]shard          // the current generation's shards, by table
	whole   map[string]bool             // the tables cut anew
	watched map[string]catalog.RepTable // the other tables: their changed keys choose the shards cut again
	cut     map[string]map[int]bool     // per table, the indexes into old of the shards cut again
}

// newPlanner starts the plan of a rollover in mode. A full generation
// cuts every table anew; any mode cuts anew a table that is new or
// changed in shape.
func newPlanner(mode rolloverMode, st *state, now []catalog.RepTable) *planner {
	if mode != full && st.LogFrom > st.Base {
		// A restored catalog's log starts after the restored change: the
		// changes since base that decide what to cut again are not in it.
		mode = full
	}
	p := &planner{
		mode: mode, base: st.Base, now: now,
		old: map[string][]shard{}, whole: map[string]bool{},
		watched: map[string]catalog.RepTable{}, cut: map[string]map[int]bool{},
	}
	shapes := map[string]catalog.RepTable{}
	for _, t := range st.Tables {
		p.old[t.Name] = t.Shards
		shapes[t.Name] = t.RepTable
	}
	for _, t := range now {
		if o, ok := shapes[t.Name]; mode == full || !ok || !sameShape(o, t) {
			p.whole[t.Name] = true
		} else {
			p.watched[t.Name] = t
		}
		p.cut[t.Name] = map[int]bool{}
	}
	return p
}

// changed notes the key of a row of t changed since base, and the row as
// it is now (nil: gone), which is known only while a fold is written. A
// purge's rollover (forget) cuts again only the shards that held a
// cleared secret: a row whose secret column is now NULL, or that is gone.
func (p *planner) changed(t catalog.RepTable, key, row []any) error {
	if p.mode == forget {
		col, secret := catalog.Secrets[t.Name]
		if !secret || (row != nil && row[colIndex(t, col)] != nil) {
			return nil
		}
	}
	i, err := shardOf(p.old[t.Name], key)
	if err != nil {
		return err
	}
	p.cut[t.Name][i] = true
	return nil
}

// changedKey notes a key the catalog's change log names: a compaction
// reads the log itself, without the rows.
func (p *planner) changedKey(name string, key []any) error {
	t, ok := p.watched[name]
	if !ok {
		return nil
	}
	return p.changed(t, key[:len(t.Key)], nil)
}

// plan returns the plan of a rollover that reads the catalog at change
// number seq. Its base is seq, but for a purge's rollover, whose fold
// keeps the old base.
func (p *planner) plan(seq int64) (rolloverPlan, error) {
	out := rolloverPlan{base: seq}
	if p.mode == forget {
		out.base = p.base
	}
	for _, t := range p.now {
		tp, err := planTable(t, p.old[t.Name], p.whole[t.Name], p.cut[t.Name])
		if err != nil {
			return rolloverPlan{}, err
		}
		out.tables = append(out.tables, tp)
	}
	return out, nil
}

// planTable plans the shards of t: the old ones kept, except those in
// cut, whose ranges are cut again. whole, or a table that held nothing,
// cuts one range holding every row.
func planTable(t catalog.RepTable, old []shard, whole bool, cut map[int]bool) (tablePlan, error) {
	if whole || len(old) == 0 {
		if !whole && len(cut) == 0 {
			return tablePlan{RepTable: t}, nil // empty and unchanged
		}
		return tablePlan{RepTable: t, whole: true, steps: []shardStep{{}}}, nil
	}
	tp := tablePlan{RepTable: t}
	for i := range old {
		if !cut[i] {
			tp.steps = append(tp.steps, shardStep{keep: &old[i]})
			continue
		}
		var s shardStep
		var err error
		if i > 0 {
			s.bound = old[i].Lo
			if s.lo, err = decodeKey(old[i].Lo); err != nil {
				return tablePlan{}, err
			}
		}
		if i+1 < len(old) {
			if s.hi, err = decodeKey(old[i+1].Lo); err != nil {
				return tablePlan{}, err
			}
		}
		tp.steps = append(tp.steps, s)
	}
	return tp, nil
}

func sameShape(a, b catalog.RepTable) bool {
	if len(a.Cols) != len(b.Cols) || len(a.Key) != len(b.Key) {
		return false
	}
	for i := range a.Cols {
		if a.Cols[i] != b.Cols[i] {
			return false
		}
	}
	for i := range a.Key {
		if a.Key[i] != b.Key[i] {
			return false
		}
	}
	return true
}

func colIndex(t catalog.RepTable, col string) int {
	for i, c := range t.Cols {
		if c == col {
			return i
		}
	}
	return -1
}

// shardOf returns the index of the shard whose range holds key: the last
// whose Lo is at or below it (the first shard takes what lies below all).
func shardOf(shards []shard, key []any) (int, error) {
	lo, hi := 1, len(shards)
	for lo < hi {
		mid := (lo + hi) / 2
		k, err := decodeKey(shards[mid].Lo)
		if err != nil {
			return 0, err
		}
		if compareKeys(k, key) <= 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo - 1, nil
}

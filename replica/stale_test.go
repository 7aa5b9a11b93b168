package replica

import (
	"context"
	"errors"
	"testing"

	"github.com/vcon-server/vcon-server/objstore"
)

// noDeletes is a target that refuses every delete, as one that fails
// between a rollover's record and its deletes.
type noDeletes struct{ objstore.Store }

func (noDeletes) Delete(context.Context, string) error { return errors.New("delete refused") }

// TestCutOffDeletesAreFinished: a rollover whose record is committed but
// whose deletes did not happen (a crash, a target that failed) leaves the
// record stale; the next step deletes what the new generation does not
// keep, even when no purge comes to roll over again (a rotation's old
// objects, sealed under the old key).
func TestCutOffDeletesAreFinished(t *testing.T) {
	f := newFixture(t)
	f.add(20)
	if err := f.rep.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	old := f.keys()
	f.rep.cfg.Store = noDeletes{f.store}
	if err := f.rep.Rotate(f.ctx); err == nil {
		t.Fatal("the rollover succeeded with no delete done")
	}
	f.rep.cfg.Store = f.store
	st, _ := f.rep.loadState(f.ctx)
	if !st.Stale || st.Gen != 2 {
		t.Fatalf("record after the failed deletes: generation %d, stale %v; want 2, true", st.Gen, st.Stale)
	}
	f.add(1)
	if err := f.rep.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	for k := range f.keys() {
		if old[k] {
			t.Errorf("%s outlived the rollover after the next step", k)
		}
	}
	if st, _ := f.rep.loadState(f.ctx); st.Stale {
		t.Fatal("the record is still stale")
	}
	f.restoreMatches()
}

// TestSettleLeavesAnotherCatalogAlone: a record left pending and stale,
// pointed at a target whose newest generation is another catalog's (the
// same directory named in two hosts' configurations), deletes nothing
// there: the step is refused as a rollover would be.
func TestSettleLeavesAnotherCatalogAlone(t *testing.T) {
	f := newFixture(t)
	f.add(5)
	if err := f.rep.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.rep.Forget(f.ctx); err != nil { // generation 2
		t.Fatal(err)
	}
	before := f.keys()
	g := newFixture(t)
	g.add(1)
	if err := g.rep.Sync(g.ctx); err != nil {
		t.Fatal(err)
	}
	st, _ := g.rep.loadState(g.ctx)
	st.Target, st.Pending, st.Stale = f.store.String(), st.Gen+1, true
	if err := g.rep.saveState(g.ctx, st, 0); err != nil {
		t.Fatal(err)
	}
	g.rep.cfg.Store = f.store
	g.add(1)
	if err := g.rep.Sync(g.ctx); !errors.Is(err, ErrForeign) {
		t.Fatalf("a step over another catalog's replica: %v, want ErrForeign", err)
	}
	if after := f.keys(); len(after) != len(before) {
		t.Fatalf("the other catalog's replica went from %d objects to %d", len(before), len(after))
	}
	f.restoreMatches()
}

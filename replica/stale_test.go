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

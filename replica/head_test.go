package replica

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/objstore"
)

// headBytes reads the head's stored bytes.
func (f *fixture) headBytes() []byte {
	f.t.Helper()
	rc, err := f.store.Get(f.ctx, headKey)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func (f *fixture) putHead(b []byte) {
	f.t.Helper()
	if err := objstore.Put(f.ctx, f.store, headKey, bytes.NewReader(b), false); err != nil {
		f.t.Fatal(err)
	}
}

// slotKeys names the object each slot's head names ("" when it does not
// open).
func (f *fixture) slotKeys(raw []byte) []string {
	var out []string
	for off := 0; off < len(raw); off += slotSize {
		h, err := openSlot(&f.rep.s, raw[off:min(off+slotSize, len(raw))])
		if err != nil || h == nil {
			out = append(out, "")
			continue
		}
		out = append(out, h.Key)
	}
	return out
}

// TestHeadSlots: in a directory, a process writes its first head whole,
// in both slots, then each cut's over the slot that does not hold the
// head before it. A reader takes the slot that names the newest object,
// passes over a torn one (a crash while a cut rewrote it: the other
// names a segment that is there, and a restore loses nothing), and
// refuses a head whose slots are both torn.
func TestHeadSlots(t *testing.T) {
	f, segs := chained(t)
	raw := f.headBytes()
	if len(raw) != 2*slotSize {
		t.Fatalf("the head holds %d bytes, want its two slots, %d", len(raw), 2*slotSize)
	}
	// The generation's head went in both slots, then the three cuts' in
	// the second, the first and the second.
	if got, want := f.slotKeys(raw), []string{segs[1], segs[2]}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("the slots name %q, want %q", got, want)
	}
	if h, err := readHead(f.ctx, &f.rep.s, f.store); err != nil || h.Key != segs[2] {
		t.Fatalf("readHead: %+v, %v; want the newest segment %s", h, err, segs[2])
	}

	torn := bytes.Clone(raw)
	torn[slotSize+100] ^= 0xff
	f.putHead(torn)
	if h, err := readHead(f.ctx, &f.rep.s, f.store); err != nil || h.Key != segs[1] {
		t.Fatalf("readHead with the newest slot torn: %+v, %v; want the slot before, %s", h, err, segs[1])
	}
	if res := f.restoreMatches(); res.Segments != 3 {
		t.Fatalf("restore with the newest slot torn applied %d segments, want 3", res.Segments)
	}

	torn[100] ^= 0xff
	f.putHead(torn)
	if _, err := readHead(f.ctx, &f.rep.s, f.store); err == nil || !strings.Contains(err.Error(), "the head is damaged") {
		t.Fatalf("readHead with both slots torn: %v, want the head damaged", err)
	}
	if _, _, err := f.restore(Options{}); err == nil || !strings.Contains(err.Error(), "the head is damaged") {
		t.Fatalf("restore with both slots torn: %v, want the head damaged", err)
	}

	// A head written before the slots is one object on its own.
	body, err := json.Marshal(head{Format: chainFormat, Gen: 1, Key: segs[2], Seq: 7, Made: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.rep.s.put(f.ctx, f.store, headKey, func(w io.Writer) error { _, err := w.Write(body); return err }); err != nil {
		t.Fatal(err)
	}
	if h, err := readHead(f.ctx, &f.rep.s, f.store); err != nil || h.Key != segs[2] || h.Seq != 7 {
		t.Fatalf("readHead of a head written whole before the slots: %+v, %v", h, err)
	}

	// Another process (a command, a restarted server) writes its first
	// head whole, in both slots, whatever this one wrote last.
	other := New(f.rep.cfg)
	f.add(2)
	if err := other.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	st, err := other.loadState(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.slotKeys(f.headBytes()); len(got) != 2 || got[0] != st.Last || got[1] != st.Last {
		t.Fatalf("another process's first head: slots %q, want %s in both", got, st.Last)
	}
}

// TestHeadBackwardsIsWhole: a head that names an older object than the
// one before it (a cut-off rollover abandoned: docs/FORMAT.md, "Replica
// rollover") is written over both slots, so that no slot is left naming
// the newer object, which would win.
func TestHeadBackwardsIsWhole(t *testing.T) {
	f, segs := chained(t)
	st, err := f.rep.loadState(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, last, _ := parseKey(segs[0])
	sum, err := f.rep.s.hashOf(f.ctx, f.store, segs[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := f.rep.writeHead(f.ctx, st.Gen, segs[0], sum, last, false); err != nil {
		t.Fatal(err)
	}
	if got := f.slotKeys(f.headBytes()); len(got) != 2 || got[0] != segs[0] || got[1] != segs[0] {
		t.Fatalf("slots after a head that goes back: %q, want %s in both", got, segs[0])
	}
	if h, err := readHead(f.ctx, &f.rep.s, f.store); err != nil || h.Key != segs[0] {
		t.Fatalf("readHead: %+v, %v; want %s", h, err, segs[0])
	}
}

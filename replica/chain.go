package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/vcon-server/vcon-server/objstore"
)

// The chain (docs/FORMAT.md, "Replica objects"): in a generation of
// format 2, every segment after the manifest names the object before it
// (the manifest, or the segment before) with the SHA-256 of its stored
// bytes, the manifest names its fold the same way, and the head names the
// newest. A restore then tells a replica that lost a segment, its newest
// included, from a whole one; what no object can tell is an older copy of
// the whole target, which carries its own head (restore --at-least).

// link names the object before a segment in the chain; the zero link
// (a fold's) names none.
type link struct {
	key string
	sum []byte
}

// head is the body of headKey: the generation and its newest object.
type head struct {
	Format int       `json:"format"`
	Gen    int64     `json:"gen"`
	Key    string    `json:"key"` // the generation's manifest or a segment of it
	Hash   []byte    `json:"hash"`
	Seq    int64     `json:"seq"` // the change number the replica reaches with it
	Made   time.Time `json:"made"`
}

// slotSize is the size of each of the head's two slots: a 2-byte
// big-endian length, then the head object (about 400 bytes), then zeros
// (docs/FORMAT.md, "Replica objects").
const slotSize = 4096

// writeHead rewrites the head to name key, the newest object of gen,
// which reaches change seq. In a target that rewrites in place (a
// directory), a cut's head goes over the slot that does not hold the
// head before it: a crash tears at most that slot, and the other still
// names an object that is there. Any other head is written whole, in
// both slots: a process's first, a rollover's (no slot keeps a head
// sealed under a rotated master key) and one that names an older object
// than the head before (a slot left naming the newer one would win).
// Elsewhere every head is written whole, in one slot: one PUT more for
// every segment.
func (r *Replica) writeHead(ctx context.Context, gen int64, key string, sum []byte, seq int64, cut bool) error {
	body, err := json.Marshal(head{Format: chainFormat, Gen: gen, Key: key, Hash: sum, Seq: seq, Made: time.Now().UTC()})
	if err != nil {
		return err
	}
	var obj bytes.Buffer
	if _, err := r.s.frame(&obj, headKey, func(out io.Writer) error {
		_, err := out.Write(body)
		return err
	}); err != nil {
		return err
	}
	if obj.Len() > slotSize-2 {
		return fmt.Errorf("replica: a head of %d bytes does not fit its slot", obj.Len())
	}
	slot := make([]byte, slotSize)
	binary.BigEndian.PutUint16(slot, uint16(obj.Len()))
	copy(slot[2:], obj.Bytes())
	p, inPlace := r.cfg.Store.(objstore.Patcher)
	if !cut {
		r.nextSlot = -1
	}
	used := slot[:2+obj.Len()] // the length says where the head ends
	if inPlace && r.nextSlot >= 0 {
		if err := p.Patch(ctx, headKey, int64(r.nextSlot*slotSize), used); err == nil {
			r.nextSlot = 1 - r.nextSlot
			r.bytes.Add(int64(len(used)))
			r.objects.Add(1)
			return nil
		}
		// Gone, replaced by a shorter one, or failing: written whole.
		r.nextSlot = -1
	}
	whole := used
	if inPlace {
		whole = append(slot, slot...)
	}
	if err := objstore.Put(ctx, r.cfg.Store, headKey, bytes.NewReader(whole), false); err != nil {
		return fmt.Errorf("replica: write the head to %s: %w", r.cfg.Store, err)
	}
	if inPlace {
		r.nextSlot = 1
	}
	r.bytes.Add(int64(len(whole)))
	r.objects.Add(1)
	return nil
}

// readHead reads the head; nil when the target has none. Of its slots,
// the one naming the newest generation and change wins; a torn one is
// passed over while the other opens. A head written before the slots is
// one object on its own, read as it is.
func readHead(ctx context.Context, s *sealer, store objstore.Store) (*head, error) {
	rc, err := store.Get(ctx, headKey)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("replica: read the head: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(rc, 2*slotSize+1))
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("replica: read the head: %w", err)
	}
	if bytes.HasPrefix(raw, magic) {
		h, err := openHead(s, raw)
		if err != nil {
			return nil, fmt.Errorf("replica: the head is damaged: %w", err)
		}
		return h, nil
	}
	if len(raw) > 2*slotSize {
		return nil, fmt.Errorf("replica: the head is damaged: %d bytes or more, more than its two slots", len(raw))
	}
	var newest *head
	var damage error
	for off := 0; off < len(raw); off += slotSize {
		slot := raw[off:min(off+slotSize, len(raw))]
		h, err := openSlot(s, slot)
		switch {
		case err != nil:
			damage = fmt.Errorf("slot %d: %w", off/slotSize+1, err)
		case h != nil && (newest == nil || h.Gen > newest.Gen || h.Gen == newest.Gen && h.Seq > newest.Seq):
			newest = h
		}
	}
	if newest == nil {
		if damage == nil {
			damage = errors.New("both slots are empty")
		}
		return nil, fmt.Errorf("replica: the head is damaged: %w", damage)
	}
	return newest, nil
}

// openSlot reads the head in one slot; nil when the slot is empty.
func openSlot(s *sealer, slot []byte) (*head, error) {
	if len(slot) < 2 {
		return nil, errors.New("cut short")
	}
	n := int(binary.BigEndian.Uint16(slot))
	if n == 0 {
		return nil, nil
	}
	if 2+n > len(slot) {
		return nil, fmt.Errorf("it says %d bytes and holds %d", n, len(slot)-2)
	}
	return openHead(s, slot[2:2+n])
}

// openHead reads a head object from its stored bytes.
func openHead(s *sealer, obj []byte) (*head, error) {
	rc, err := s.open(headKey, io.NopCloser(bytes.NewReader(obj)), nil)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	h := &head{}
	if err := json.NewDecoder(io.LimitReader(rc, 64<<10)).Decode(h); err != nil {
		return nil, err
	}
	return h, drained(rc, headKey)
}

// ErrLoss is wrapped by a restore's refusal of a replica that lacks
// changes it once held, or that --at-least asks for.
var ErrLoss = errors.New("replica: changes are missing")

// Loss is what a restore found missing: changes From to To (To 0: an
// unknown number after From), and why it knows.
type Loss struct {
	From int64  `json:"from"`
	To   int64  `json:"to,omitempty"`
	What string `json:"what"`
}

// Range says which changes were lost, as the admin log records them.
func (l *Loss) Range() string {
	if l.To == 0 {
		return fmt.Sprintf("changes from %d on", l.From)
	}
	return fmt.Sprintf("changes %d to %d", l.From, l.To)
}

// plan is what a restore reads, decided from the listing, the head and
// the newest manifest before any row is loaded.
type plan struct {
	gen      *generation
	m        *manifest
	mSum     []byte
	head     *head
	fold     *segRange // format 2: the fold the manifest names
	segs     []segRange
	reach    int64 // the change the chain reaches
	loss     *Loss
	warnings []string
	maxGen   int64 // the highest generation and change number any object names
	maxSeq   int64
	older    bool // objects of an older generation remain (a rollover's deletes cut off)
}

// planRestore reads what a restore of store needs to know first: the
// newest whole generation, the chain of its segments, and what the chain
// lacks against the head, and against atLeast.
func planRestore(ctx context.Context, s *sealer, store objstore.Store, atLeast int64) (*plan, error) {
	gens, err := listGenerations(ctx, store)
	if err != nil {
		return nil, err
	}
	p := &plan{}
	for _, g := range gens {
		p.maxGen = max(p.maxGen, g.gen)
		for _, sg := range g.segs {
			p.maxSeq = max(p.maxSeq, sg.last)
		}
		if p.gen == nil && g.manifest {
			p.gen = g // a generation without one was cut off before it
		}
	}
	if p.gen == nil {
		return nil, fmt.Errorf("replica: %s holds no generation of a catalog replica", store)
	}
	if p.m, p.mSum, err = readManifest(ctx, s, store, p.gen.gen); err != nil {
		return nil, err
	}
	if p.head, err = readHead(ctx, s, store); err != nil {
		return nil, err
	}
	kept := keptShards(p.m.Tables)
	for _, g := range gens {
		for _, k := range g.keys {
			p.older = p.older || (g.gen < p.gen.gen && !kept[k])
		}
	}
	m, h := p.m, p.head
	if m.Format < chainFormat {
		p.reach = m.Base
		next, segs := follow(p.gen, m.Base+1)
		p.segs = segs
		if next <= m.Seq {
			p.lose(p.reach+1, m.Seq, fmt.Sprintf("generation %d lacks the segment that starts at change %d; its manifest needs changes up to %d", m.Gen, next, m.Seq))
			p.segs = nil
		} else {
			p.reach = next - 1
		}
		p.warnings = append(p.warnings, fmt.Sprintf("generation %d was written before segments named their predecessor: a lost newest segment cannot be told from here; restore --at-least with the change number check showed makes sure", m.Gen))
	} else {
		p.reach = m.Seq
		if m.Fold != "" {
			_, _, first, last, ok := parseKey(m.Fold)
			if !ok || !p.gen.has(first, last) {
				p.reach = m.Base
				p.lose(m.Base+1, 0, fmt.Sprintf("generation %d lacks its fold %s, which its manifest names", m.Gen, m.Fold))
			} else {
				p.fold = &segRange{first, last}
			}
		}
		if p.loss == nil {
			next, segs := follow(p.gen, m.Seq+1)
			p.segs, p.reach = segs, next-1
		}
	}
	switch {
	case h == nil && m.Format >= chainFormat:
		p.lose(p.reach+1, 0, fmt.Sprintf("the head (%s), which names the newest segment, is missing, so the newest segments may be missing too", headKey))
	case h == nil:
	case h.Gen > m.Gen:
		p.lose(p.reach+1, h.Seq, fmt.Sprintf("the head names generation %d, whose manifest is missing", h.Gen))
	case h.Gen == m.Gen && h.Seq > p.reach:
		p.lose(p.reach+1, h.Seq, fmt.Sprintf("generation %d lacks the segment that starts at change %d%s; the head names %s, which reaches change %d", m.Gen, p.reach+1, p.after(p.reach+1), h.Key, h.Seq))
	case h.Gen < m.Gen && h.Seq > m.Seq:
		p.lose(m.Seq+1, h.Seq, fmt.Sprintf("the head names generation %d at change %d, beyond the newest manifest's change %d", h.Gen, h.Seq, m.Seq))
	}
	if atLeast > p.reach {
		p.lose(p.reach+1, atLeast, fmt.Sprintf("the replica reaches change %d, behind change %d that --at-least asks for: it is an older copy, or lost its newest objects", p.reach, atLeast))
	}
	return p, nil
}

// lose records a loss, the widest range of those found.
func (p *plan) lose(from, to int64, what string) {
	if p.loss == nil {
		p.loss = &Loss{From: from, To: to, What: what}
		return
	}
	p.loss.What += "; " + what
	p.loss.From = min(p.loss.From, from)
	if p.loss.To != 0 && (to == 0 || to > p.loss.To) {
		p.loss.To = to
	}
}

// after says where the next segment present after a gap starts.
func (p *plan) after(from int64) string {
	next := int64(0)
	for _, sg := range p.gen.segs {
		if sg.first > from && (next == 0 || sg.first < next) {
			next = sg.first
		}
	}
	if next == 0 {
		return ""
	}
	return fmt.Sprintf(" (the next one present starts at change %d)", next)
}

func (g *generation) has(first, last int64) bool {
	for _, sg := range g.segs {
		if sg.first == first && sg.last == last {
			return true
		}
	}
	return false
}

// follow returns the segments of g from change next on, each starting
// where the one before ended, the longest when a cut-off step left two
// with one start, and the change after the last.
func follow(g *generation, next int64) (int64, []segRange) {
	var out []segRange
	for {
		var best *segRange
		for i, sg := range g.segs {
			if sg.first == next && (best == nil || sg.last > best.last) {
				best = &g.segs[i]
			}
		}
		if best == nil {
			return next, out
		}
		out = append(out, *best)
		next = best.last + 1
	}
}

// refusal is the error of a loss not accepted.
func (p *plan) refusal() error {
	return fmt.Errorf("%w: %s; restore from a copy of the replica that holds them, or run restore --accept-loss to restore up to change %d and record the loss (%s) in the admin log",
		ErrLoss, p.loss.What, p.reach, p.loss.Range())
}

package replica

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/seal"
)

// Restored describes a catalog rebuilt from a replica.
type Restored struct {
	Generation int64     `json:"generation"`
	Made       time.Time `json:"made"` // when the generation's manifest was written
	Replicated int64     `json:"replicated"`
	Shards     int       `json:"shards"`
	Segments   int       `json:"segments"`
	Rows       int64     `json:"rows"`
	Lost       *Loss     `json:"lost,omitempty"` // what --accept-loss restored without
	Warnings   []string  `json:"warnings,omitempty"`
}

// Options are a restore's: AtLeast refuses a replica behind that change
// number (an older copy of the target, which nothing in it can tell);
// AcceptLoss restores what there is past a refusal for a loss, and
// records the loss in the admin log.
type Options struct {
	AtLeast    int64
	AcceptLoss bool
}

// generation is what a listing shows of one generation.
type generation struct {
	gen      int64
	manifest bool
	segs     []segRange
	keys     []string
}

type segRange struct{ first, last int64 }

func listGenerations(ctx context.Context, store objstore.Store) ([]*generation, error) {
	byGen := map[int64]*generation{}
	err := store.List(ctx, root, func(in objstore.Info) error {
		g, kind, first, last, ok := parseKey(in.Key)
		if !ok {
			return nil
		}
		gg := byGen[g]
		if gg == nil {
			gg = &generation{gen: g}
			byGen[g] = gg
		}
		gg.keys = append(gg.keys, in.Key)
		switch kind {
		case "manifest":
			gg.manifest = true
		case "seg":
			gg.segs = append(gg.segs, segRange{first, last})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("replica: list %s: %w", store, err)
	}
	var out []*generation
	for _, g := range byGen {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].gen > out[j].gen })
	return out, nil
}

// Holds reports whether store holds a generation of a catalog replica.
func Holds(ctx context.Context, store objstore.Store) (bool, error) {
	gens, err := listGenerations(ctx, store)
	if err != nil {
		return false, err
	}
	for _, g := range gens {
		if g.manifest {
			return true, nil
		}
	}
	return false, nil
}

// readManifest reads the manifest of gen and the SHA-256 of its bytes,
// by which the first segment after it names it.
func readManifest(ctx context.Context, s *sealer, store objstore.Store, gen int64) (*manifest, []byte, error) {
	sum := sha256.New()
	rc, err := s.get(ctx, store, manifestKey(gen), sum)
	if err != nil {
		return nil, nil, err
	}
	defer rc.Close()
	m := &manifest{}
	if err := json.NewDecoder(io.LimitReader(rc, 256<<20)).Decode(m); err != nil {
		return nil, nil, fmt.Errorf("replica: the manifest of generation %d is damaged: %w", gen, err)
	}
	if m.Format < 1 || m.Format > chainFormat || m.Gen != gen {
		return nil, nil, fmt.Errorf("replica: the manifest of generation %d is of an unknown format %d", gen, m.Format)
	}
	if err := drained(rc, manifestKey(gen)); err != nil {
		return nil, nil, err
	}
	return m, sum.Sum(nil), nil
}

// Restore rebuilds the catalog file at path (which must not exist) from
// the newest generation in store: its shards, then its segments in order,
// each checked against the one before. It refuses, wrapping ErrLoss, a
// replica that lacks changes its head names, or that opts.AtLeast asks
// for, unless opts.AcceptLoss. The master key must be the one the replica
// was sealed under. The rebuilt catalog carries on the replica's
// generation (its record, and its change numbers after the restored one).
func Restore(ctx context.Context, store objstore.Store, key *seal.MasterKey, path string, opts Options) (Restored, error) {
	var res Restored
	s := &sealer{key: key}
	p, err := planRestore(ctx, s, store, opts.AtLeast)
	if err != nil {
		return res, err
	}
	m := p.m
	if string(m.KeyCheck) != string(key.CheckValue()) {
		return res, fmt.Errorf("replica: generation %d was sealed under another master key than the one configured", m.Gen)
	}
	if p.loss != nil && !opts.AcceptLoss {
		return res, p.refusal()
	}
	res.Generation, res.Made, res.Lost, res.Warnings = m.Gen, m.Made, p.loss, p.warnings
	err = catalog.Build(ctx, path, m.Schema, func(l *catalog.Loader) error {
		for _, t := range m.Tables {
			for _, sh := range t.Shards {
				n, err := loadShard(ctx, s, store, l, t, sh.Key)
				if err != nil {
					return err
				}
				res.Shards++
				res.Rows += n
			}
		}
		last, err := applyChain(ctx, s, store, l, p, &res)
		if err != nil {
			return err
		}
		res.Replicated = p.reach
		carry(l, store, p, last)
		return nil
	})
	if err == nil {
		err = checkKey(ctx, path, key)
	}
	return res, err
}

// applyChain applies the plan's segments in order, each checked against
// the object before it when the generation links them, and returns the
// newest object applied with its SHA-256.
func applyChain(ctx context.Context, s *sealer, store objstore.Store, l *catalog.Loader, p *plan, res *Restored) (link, error) {
	m := p.m
	prev := link{key: manifestKey(m.Gen), sum: p.mSum}
	chained := m.Format >= chainFormat
	if p.fold != nil {
		key := segmentKey(m.Gen, p.fold.first, p.fold.last)
		sum, err := applySegment(ctx, s, store, l, key, chained, link{})
		if err != nil {
			return prev, err
		}
		if !bytes.Equal(sum, m.FoldHash) {
			return prev, fmt.Errorf("replica: the fold %s is not the one the manifest of generation %d names", key, m.Gen)
		}
		res.Segments++
	}
	if p.head != nil && p.head.Key == prev.key && !bytes.Equal(p.head.Hash, prev.sum) {
		return prev, fmt.Errorf("replica: the manifest of generation %d is not the one the head names", m.Gen)
	}
	for _, seg := range p.segs {
		key := segmentKey(m.Gen, seg.first, seg.last)
		sum, err := applySegment(ctx, s, store, l, key, chained, prev)
		if err != nil {
			return prev, err
		}
		if p.head != nil && p.head.Key == key && !bytes.Equal(p.head.Hash, sum) {
			return prev, fmt.Errorf("replica: segment %s is not the one the head names", key)
		}
		prev = link{key: key, sum: sum}
		res.Segments++
	}
	return prev, nil
}

// carry makes the rebuilt catalog carry on the restored generation: the
// replica's record, as the server would have written it after the newest
// segment applied, and the change log going on after the restored change.
// After a loss, the log goes on after the highest change number the
// replica ever named or --at-least gave, so that no number names two
// changes, and the first step writes a whole generation. The admin log
// records the restore, and the loss.
func carry(l *catalog.Loader, store objstore.Store, p *plan, last link) {
	m := p.m
	st := &state{
		Target: store.String(), Gen: m.Gen, Base: m.Base, Uploaded: p.reach, Segments: len(p.segs),
		KeyCheck: m.KeyCheck, Tables: m.Tables, Last: last.key, LastHash: last.sum,
		LogFrom: p.reach, Restored: true,
		// Objects of older generations a cut-off rollover left, and of
		// newer ones without a manifest, go at the first step.
		Stale: p.older, Used: p.maxGen,
	}
	if p.maxGen > m.Gen {
		st.Pending = p.maxGen
	}
	if m.Format >= chainFormat {
		st.Format = chainFormat
	}
	target := fmt.Sprintf("generation %d, change %d", m.Gen, p.reach)
	l.AdminLog(catalog.Record{Actor: catalog.CLI.Name, Action: "catalog_restore", Target: target, Status: 200})
	if loss := p.loss; loss != nil {
		st.Rewrite = "the restore accepted a loss"
		st.LogFrom = max(p.reach, loss.To, p.maxSeq, p.head.seq())
		l.AdminLog(catalog.Record{Actor: catalog.CLI.Name, Action: "catalog_restore_loss", Target: loss.Range() + ": " + loss.What, Status: 200})
		l.SetMeta(catalog.MetaRestoreLoss, []byte(loss.Range()))
	}
	l.Carry(st.LogFrom, func(schema string) ([]byte, error) {
		st.Schema = schema
		return json.Marshal(st)
	})
}

func (h *head) seq() int64 {
	if h == nil {
		return 0
	}
	return h.Seq
}

// checkKey opens the rebuilt catalog and compares its master key check
// value with the key's, as every start does.
func checkKey(ctx context.Context, path string, key *seal.MasterKey) error {
	check, err := catalog.FileKeyCheck(ctx, path)
	if err != nil {
		return err
	}
	if string(check) != string(key.CheckValue()) {
		return errors.New("replica: the rebuilt catalog's master key check value differs from the configured key's")
	}
	return nil
}

func loadShard(ctx context.Context, s *sealer, store objstore.Store, l *catalog.Loader, t table, key string) (int64, error) {
	rc, err := s.get(ctx, store, key, nil)
	if err != nil {
		return 0, fmt.Errorf("replica: read shard %s: %w", key, err)
	}
	defer rc.Close()
	d := newDecoder(rc)
	var n int64
	for {
		rec, err := d.byte()
		if err != nil {
			return n, fmt.Errorf("replica: shard %s: %w", key, err)
		}
		if rec == recEnd {
			break
		}
		if rec != recPut {
			return n, fmt.Errorf("replica: shard %s: %w", key, errCorrupt)
		}
		row, err := d.values(len(t.Cols))
		if err != nil {
			return n, fmt.Errorf("replica: shard %s: %w", key, err)
		}
		if err := l.Put(t.Name, t.Cols, row); err != nil {
			return n, err
		}
		n++
	}
	return n, drained(rc, key)
}

// drained reads the rest of a sealed body, so its final chunk's tag is
// verified: an object cut short fails here, never loads half.
func drained(r io.Reader, key string) error {
	if _, err := io.Copy(io.Discard, r); err != nil {
		return fmt.Errorf("replica: %s: %w", key, err)
	}
	return nil
}

// applySegment applies the segment under key and returns the SHA-256 of
// its bytes. A chained segment first names the object before it, which
// must be prev.
func applySegment(ctx context.Context, s *sealer, store objstore.Store, l *catalog.Loader, key string, chained bool, prev link) ([]byte, error) {
	sum := sha256.New()
	rc, err := s.get(ctx, store, key, sum)
	if err != nil {
		return nil, fmt.Errorf("replica: read segment %s: %w", key, err)
	}
	defer rc.Close()
	d := newDecoder(rc)
	if chained {
		k, err1 := d.bytes()
		h, err2 := d.bytes()
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("replica: segment %s: %w", key, err)
		}
		if string(k) != prev.key || !bytes.Equal(h, prev.sum) {
			return nil, fmt.Errorf("replica: segment %s does not follow %s in the chain: it names %q; the replica's objects were changed by something other than the server", key, prev.key, k)
		}
	}
	if err := applyRecords(d, l, key); err != nil {
		return nil, err
	}
	if err := drained(rc, key); err != nil {
		return nil, err
	}
	return sum.Sum(nil), nil
}

// applyRecords applies a segment body after its link: its tables, then
// its records.
func applyRecords(d *decoder, l *catalog.Loader, key string) error {
	fail := func(err error) error { return fmt.Errorf("replica: segment %s: %w", key, err) }
	n, err := d.uvarint()
	if err != nil || n > 1024 {
		return fail(errCorrupt)
	}
	tables := make([]catalog.RepTable, n)
	for i := range tables {
		name, err := d.bytes()
		if err != nil {
			return fail(err)
		}
		t := catalog.RepTable{Name: string(name)}
		nc, err := d.uvarint()
		if err != nil || nc > 1024 {
			return fail(errCorrupt)
		}
		for range nc {
			c, err := d.bytes()
			if err != nil {
				return fail(err)
			}
			t.Cols = append(t.Cols, string(c))
		}
		nk, err := d.uvarint()
		if err != nil || nk > 8 {
			return fail(errCorrupt)
		}
		for range nk {
			k, err := d.uvarint()
			if err != nil || k >= nc {
				return fail(errCorrupt)
			}
			t.Key = append(t.Key, int(k))
		}
		tables[i] = t
	}
	for {
		rec, err := d.byte()
		if err != nil {
			return fail(err)
		}
		if rec == recEnd {
			break
		}
		ti, err := d.uvarint()
		if err != nil || ti >= n {
			return fail(errCorrupt)
		}
		t := tables[ti]
		switch rec {
		case recPut:
			row, err := d.values(len(t.Cols))
			if err != nil {
				return fail(err)
			}
			if err := l.Put(t.Name, t.Cols, row); err != nil {
				return err
			}
		case recDelete:
			k, err := d.values(len(t.Key))
			if err != nil {
				return fail(err)
			}
			cols := make([]string, len(t.Key))
			for i, p := range t.Key {
				cols[i] = t.Cols[p]
			}
			if err := l.Delete(t.Name, cols, k); err != nil {
				return err
			}
		default:
			return fail(errCorrupt)
		}
	}
	return nil
}

// Verify reads the replica as a restore would, without writing anything:
// the newest manifest opens with the key, every shard it names exists with
// the catalog's id, the segments chain up to what the head names and to
// what the catalog's record says was replicated. It returns the problems
// found.
func (r *Replica) Verify(ctx context.Context) (Status, []string, error) {
	st := r.Status()
	rec, err := r.loadState(ctx)
	if err != nil {
		return st, nil, err
	}
	if rec == nil || rec.Gen == 0 {
		return st, []string{"the replica has no generation yet: the server writes the first one when it starts"}, nil
	}
	st.Generation, st.Replicated = rec.Gen, rec.Uploaded
	s := &sealer{key: r.cfg.Key, catalog: r.cfg.Cat.ID}
	p, err := planRestore(ctx, s, r.cfg.Store, 0)
	if err != nil {
		return st, []string{err.Error()}, nil
	}
	m := p.m
	var problems []string
	if m.Gen != rec.Gen {
		problems = append(problems, fmt.Sprintf("the newest generation in %s is %d, the catalog's record names %d", r.cfg.Store, m.Gen, rec.Gen))
	}
	for _, t := range m.Tables {
		for _, sh := range t.Shards {
			if _, err := r.cfg.Store.Stat(ctx, sh.Key); err != nil {
				problems = append(problems, fmt.Sprintf("shard %s of generation %d: %v", sh.Key, m.Gen, err))
			}
		}
	}
	if p.loss != nil {
		problems = append(problems, p.loss.What)
	} else if m.Gen == rec.Gen && p.reach < rec.Uploaded {
		problems = append(problems, fmt.Sprintf("the segments of generation %d reach change %d, the catalog's record says %d were replicated", m.Gen, p.reach, rec.Uploaded))
	}
	return st, problems, nil
}

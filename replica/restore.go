package replica

import (
	"context"
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
}

// generation is what a listing shows of one generation.
type generation struct {
	gen      int64
	manifest bool
	segs     []segRange
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

// newest returns the newest whole generation and its manifest.
func newest(ctx context.Context, s *sealer, store objstore.Store) (*generation, *manifest, error) {
	gens, err := listGenerations(ctx, store)
	if err != nil {
		return nil, nil, err
	}
	for _, g := range gens {
		if !g.manifest {
			continue // a rollover cut off before its manifest
		}
		m, err := readManifest(ctx, s, store, g.gen)
		return g, m, err
	}
	return nil, nil, fmt.Errorf("replica: %s holds no generation of a catalog replica", store)
}

func readManifest(ctx context.Context, s *sealer, store objstore.Store, gen int64) (*manifest, error) {
	rc, err := s.get(ctx, store, manifestKey(gen))
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	m := &manifest{}
	if err := json.NewDecoder(io.LimitReader(rc, 256<<20)).Decode(m); err != nil {
		return nil, fmt.Errorf("replica: the manifest of generation %d is damaged: %w", gen, err)
	}
	if m.Format != 1 || m.Gen != gen {
		return nil, fmt.Errorf("replica: the manifest of generation %d is of an unknown format %d", gen, m.Format)
	}
	return m, nil
}

// chain returns the segments to apply after the manifest, in order: from
// Base+1 on, each starting where the one before ended, the longest when a
// cut-off step left two with one start.
func chain(g *generation, m *manifest) ([]segRange, error) {
	next := m.Base + 1
	var out []segRange
	for {
		var best *segRange
		for i, s := range g.segs {
			if s.first == next && (best == nil || s.last > best.last) {
				best = &g.segs[i]
			}
		}
		if best == nil {
			break
		}
		out = append(out, *best)
		next = best.last + 1
	}
	if next <= m.Seq {
		return nil, fmt.Errorf("replica: generation %d lacks the segment that starts at change %d; its manifest needs changes up to %d", m.Gen, next, m.Seq)
	}
	return out, nil
}

// Restore rebuilds the catalog file at path (which must not exist) from
// the newest generation in store: its shards, then its segments in order.
// The master key must be the one the replica was sealed under.
func Restore(ctx context.Context, store objstore.Store, key *seal.MasterKey, path string) (Restored, error) {
	var res Restored
	s := &sealer{key: key}
	g, m, err := newest(ctx, s, store)
	if err != nil {
		return res, err
	}
	if string(m.KeyCheck) != string(key.CheckValue()) {
		return res, fmt.Errorf("replica: generation %d was sealed under another master key than the one configured", m.Gen)
	}
	segs, err := chain(g, m)
	if err != nil {
		return res, err
	}
	res.Generation, res.Made = m.Gen, m.Made
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
		for _, seg := range segs {
			if err := applySegment(ctx, s, store, l, segmentKey(m.Gen, seg.first, seg.last)); err != nil {
				return err
			}
			res.Segments++
			res.Replicated = seg.last
		}
		return nil
	})
	if res.Replicated == 0 {
		res.Replicated = m.Seq
	}
	if err == nil {
		err = checkKey(ctx, path, key)
	}
	return res, err
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
	rc, err := s.get(ctx, store, key)
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

func applySegment(ctx context.Context, s *sealer, store objstore.Store, l *catalog.Loader, key string) error {
	rc, err := s.get(ctx, store, key)
	if err != nil {
		return fmt.Errorf("replica: read segment %s: %w", key, err)
	}
	defer rc.Close()
	d := newDecoder(rc)
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
	return drained(rc, key)
}

// Verify reads the replica as a restore would, without writing anything:
// the newest manifest opens with the key, every shard it names exists with
// the catalog's id, and the segments chain up to what the catalog's record
// says was replicated. It returns the problems found.
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
	g, m, err := newest(ctx, s, r.cfg.Store)
	if err != nil {
		return st, []string{err.Error()}, nil
	}
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
	segs, err := chain(g, m)
	if err != nil {
		problems = append(problems, err.Error())
	} else if reach := max(m.Seq, lastOf(segs)); m.Gen == rec.Gen && reach < rec.Uploaded {
		problems = append(problems, fmt.Sprintf("the segments of generation %d reach change %d, the catalog's record says %d were replicated", m.Gen, reach, rec.Uploaded))
	}
	return st, problems, nil
}

func lastOf(segs []segRange) int64 {
	if len(segs) == 0 {
		return 0
	}
	return segs[len(segs)-1].last
}

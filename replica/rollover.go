package replica

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/ids"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/objstore"
)

// A rollover writes a new generation and deletes what it no longer names
// (docs/FORMAT.md, "Replica rollover"): for a purge, a master-key
// rotation, a compaction, or a record that a crash left pending.

// Forget returns once a rollover that started after it was called is
// done: every replica object older than a key destruction committed
// before the call is deleted and proven gone. Purges arriving together
// share one rollover (docs/FORMAT.md, "Replica rollover").
func (r *Replica) Forget(ctx context.Context) error {
	ticket := r.forgets.Add(1)
	unlock, err := r.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if r.forgot >= ticket {
		return nil
	}
	covered := r.forgets.Load()
	st, err := r.loadState(ctx)
	if err != nil {
		return err
	}
	if err := r.settle(ctx, st); err != nil {
		r.note(err)
		return err
	}
	mode := forget
	if r.needsGeneration(ctx, st) != "" {
		mode = full
	} else if r.compactDue(st) {
		mode = compact
	}
	if st != nil && st.Restored && mode != full {
		r.carryOn(st)
	}
	err = r.rollover(ctx, st, mode)
	r.note(err)
	if err == nil {
		r.forgot = covered
	}
	return err
}

// Rotate writes a whole generation sealed under the (new) master key and
// deletes every object sealed under the old one.
func (r *Replica) Rotate(ctx context.Context) error {
	unlock, err := r.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := r.loadState(ctx)
	if err != nil {
		return err
	}
	return r.rollover(ctx, st, full)
}

type rolloverMode int

const (
	full    rolloverMode = iota // every shard cut again from the catalog
	compact                     // the shards the segments changed cut again; no fold
	forget                      // the shards that held a cleared secret cut again; the rest folded into one segment
)

// rollover writes generation gen+1 and deletes every object it does not
// name, in the order of docs/FORMAT.md, "Replica rollover": the pending
// generation recorded, shards and fold written, the manifest written
// last, the record committed, then the old objects deleted and proven
// gone. It runs under lock.
func (r *Replica) rollover(ctx context.Context, st *state, mode rolloverMode) error {
	existing, maxGen, err := r.listAll(ctx)
	if err != nil {
		return err
	}
	if err := r.ownTarget(ctx, existing); err != nil {
		return err
	}
	if st == nil {
		st = &state{}
	}
	if mode != full && st.LogFrom > st.Base {
		// A restored catalog's log starts after the restored change: the
		// changes since base that decide what to cut again are not in it.
		mode = full
	}
	gen := max(st.Gen, st.Pending, st.Used, maxGen) + 1
	st.Pending = gen
	if err := r.saveState(ctx, st, 0); err != nil {
		return err
	}
	crashpoint.Hit(crashpoint.ReplicaAfterPending)

	m := &manifest{Format: chainFormat, Gen: gen, Made: time.Now().UTC(), KeyCheck: r.cfg.Key.CheckValue()}
	var schemaFP string
	var total int64
	err = r.cfg.Cat.Read(ctx, func(v *catalog.View) error {
		seq, err := v.LastChange()
		if err != nil {
			return err
		}
		m.Seq = seq
		if m.Schema, schemaFP, err = v.Schema(); err != nil {
			return err
		}
		now, err := v.Tables()
		if err != nil {
			return err
		}
		old := map[string]table{}
		for _, t := range st.Tables {
			old[t.Name] = t
		}
		// Which shards of each table to cut again, by index into the old
		// list; a table new or changed in shape is cut whole.
		cut := map[string]map[int]bool{}
		whole := map[string]bool{}
		for _, t := range now {
			o, ok := old[t.Name]
			if mode == full || !ok || !sameShape(o.RepTable, t) {
				whole[t.Name] = true
			}
			cut[t.Name] = map[int]bool{}
		}
		m.Base = st.Base
		if mode != full {
			byName := map[string]catalog.RepTable{}
			for _, t := range now {
				if !whole[t.Name] {
					byName[t.Name] = t
				}
			}
			mark := func(t catalog.RepTable, key, row []any) error {
				if mode == forget {
					col, secret := catalog.Secrets[t.Name]
					if !secret || (row != nil && row[colIndex(t, col)] != nil) {
						return nil
					}
				}
				i, err := shardOf(old[t.Name].Shards, key)
				if err != nil {
					return err
				}
				cut[t.Name][i] = true
				return nil
			}
			if mode == forget {
				// The fold: every row changed since the base, as of now.
				if seq > st.Base {
					key := segmentKey(gen, st.Base+1, seq)
					w, err := r.s.put(ctx, r.cfg.Store, key, func(w io.Writer) error {
						return writeChanges(w, v, link{}, tablesOf(now), byName, st.Base, seq, mark)
					})
					if err != nil {
						return fmt.Errorf("write the fold: %w", err)
					}
					total += w.n
					r.objects.Add(1)
					m.Fold, m.FoldHash = key, w.sum
				}
			} else if err := v.Changes(st.Base, seq, func(name string, key []any) error {
				t, ok := byName[name]
				if !ok {
					return nil
				}
				return mark(t, key[:len(t.Key)], nil)
			}); err != nil {
				return err
			}
		}
		if mode != forget {
			m.Base = seq
		}
		for _, t := range now {
			shards, n, err := r.cutTable(ctx, v, gen, t, old[t.Name].Shards, whole[t.Name], cut[t.Name])
			if err != nil {
				return err
			}
			total += n
			m.Tables = append(m.Tables, table{RepTable: t, Shards: shards})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("replica: write generation %d to %s: %w", gen, r.cfg.Store, err)
	}
	crashpoint.Hit(crashpoint.ReplicaAfterShards)
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	mw, err := r.s.put(ctx, r.cfg.Store, manifestKey(gen), func(w io.Writer) error {
		_, err := w.Write(body)
		return err
	})
	if err != nil {
		return fmt.Errorf("replica: write the manifest of generation %d to %s: %w", gen, r.cfg.Store, err)
	}
	total += mw.n
	r.bytes.Add(total)
	r.objects.Add(1)
	crashpoint.Hit(crashpoint.ReplicaAfterManifest)
	if err := r.writeHead(ctx, gen, manifestKey(gen), mw.sum, m.Seq); err != nil {
		return err
	}
	crashpoint.Hit(crashpoint.ReplicaAfterNewHead)

	// The record says its deletes are still to do (Stale) until they are
	// proven done: a process cut off between the two finishes them at its
	// next step, so no object sealed under a rotated key, or holding a
	// destroyed one, outlives a crash (a purge's own rollover is done
	// again by the sweep; a rotation's is not).
	next := &state{
		Target: r.cfg.Store.String(), Gen: gen, Base: m.Base, Uploaded: m.Seq,
		Schema: schemaFP, KeyCheck: m.KeyCheck, Tables: m.Tables, Stale: true,
		Format: chainFormat, Last: manifestKey(gen), LastHash: mw.sum,
	}
	trim := int64(0)
	if m.Base == m.Seq {
		trim = m.Seq
	}
	if err := r.saveState(ctx, next, trim); err != nil {
		return err
	}
	crashpoint.Hit(crashpoint.ReplicaAfterRecord)
	if err := r.deleteAllBut(ctx, existing, gen, keptShards(m.Tables)); err != nil {
		return err
	}
	next.Stale = false
	if err := r.saveState(ctx, next, 0); err != nil {
		return err
	}
	r.cfg.Log.Info("replica: generation written", "generation", gen, "replicated", m.Seq, "bytes", total)
	return nil
}

func tablesOf(ts []catalog.RepTable) []table {
	out := make([]table, len(ts))
	for i, t := range ts {
		out[i] = table{RepTable: t}
	}
	return out
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

// cutTable returns the shards of t for the new generation: the old ones
// kept, except those in cut, whose ranges are read again and written as
// new shards of gen (split when they grew). whole cuts every range anew.
func (r *Replica) cutTable(ctx context.Context, v *catalog.View, gen int64, t catalog.RepTable, old []shard, whole bool, cut map[int]bool) ([]shard, int64, error) {
	if whole || len(old) == 0 {
		if !whole && len(cut) == 0 {
			return nil, 0, nil // empty and unchanged
		}
		return r.cutRange(ctx, v, gen, t, nil, nil)
	}
	var out []shard
	var total int64
	for i, s := range old {
		if !cut[i] {
			out = append(out, s)
			continue
		}
		var lo, hi []any
		var err error
		if i > 0 {
			if lo, err = decodeKey(s.Lo); err != nil {
				return nil, 0, err
			}
		}
		if i+1 < len(old) {
			if hi, err = decodeKey(old[i+1].Lo); err != nil {
				return nil, 0, err
			}
		}
		shards, n, err := r.cutRange(ctx, v, gen, t, lo, hi)
		if err != nil {
			return nil, 0, err
		}
		total += n
		if len(shards) > 0 && i > 0 {
			shards[0].Lo = s.Lo // the range keeps its bound even if its first row went
		}
		out = append(out, shards...)
	}
	if len(out) > 0 {
		out[0].Lo = nil
	}
	return out, total, nil
}

// cutRange writes the rows of t in [lo, hi) as shards of up to shardRows
// rows each.
func (r *Replica) cutRange(ctx context.Context, v *catalog.View, gen int64, t catalog.RepTable, lo, hi []any) ([]shard, int64, error) {
	var out []shard
	var total int64
	var rows [][]any
	flush := func() error {
		if len(rows) == 0 {
			return nil
		}
		first, err := encodeKey(t.KeyOf(rows[0]))
		if err != nil {
			return err
		}
		key := shardKey(gen, ids.NewRandom())
		w, err := r.s.put(ctx, r.cfg.Store, key, func(w io.Writer) error {
			e := newEncoder(w)
			for _, row := range rows {
				e.byte(recPut)
				e.values(row)
			}
			e.byte(recEnd)
			return e.flush()
		})
		if err != nil {
			return fmt.Errorf("write a shard of %s: %w", t.Name, err)
		}
		total += w.n
		r.objects.Add(1)
		out = append(out, shard{Lo: first, Key: key, Rows: len(rows)})
		rows = rows[:0]
		return nil
	}
	err := v.Range(t, lo, hi, func(row []any) error {
		rows = append(rows, row)
		if len(rows) == shardRows {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	return out, total, err
}

// Vet refuses, before a server starts, a target that holds another
// catalog's replica.
func (r *Replica) Vet(ctx context.Context) error {
	keys, _, err := r.listAll(ctx)
	if err != nil {
		return err
	}
	return r.ownTarget(ctx, keys)
}

// ownTarget refuses a target whose newest manifest is another catalog's:
// a rollover would delete that replica, perhaps the only copy of another
// host's keys (a data directory made by init where restore was meant).
func (r *Replica) ownTarget(ctx context.Context, keys []string) error {
	newest := ""
	for _, k := range keys {
		if _, kind, _, _, ok := parseKey(k); ok && kind == "manifest" {
			newest = k // keys are listed in order: the last is the newest
		}
	}
	if newest == "" {
		return nil
	}
	id, err := objectCatalog(ctx, r.cfg.Store, newest)
	if err != nil {
		return err
	}
	if id != r.cfg.Cat.ID {
		return fmt.Errorf("%w: %s holds the replica of another catalog (%s); to rebuild that catalog, stop the server, move this data directory's catalog.db away and run vcon-server restore; else point [replica] at another place", ErrForeign, r.cfg.Store, id)
	}
	return nil
}

// listAll lists every replica object and the newest generation named.
func (r *Replica) listAll(ctx context.Context) ([]string, int64, error) {
	var keys []string
	var maxGen int64
	err := r.cfg.Store.List(ctx, root, func(in objstore.Info) error {
		keys = append(keys, in.Key)
		if g, _, _, _, ok := parseKey(in.Key); ok && g > maxGen {
			maxGen = g
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("replica: list %s: %w", r.cfg.Store, err)
	}
	return keys, maxGen, nil
}

func keptShards(tables []table) map[string]bool {
	keep := map[string]bool{}
	for _, t := range tables {
		for _, s := range t.Shards {
			keep[s.Key] = true
		}
	}
	return keep
}

// deleteAllBut deletes every key listed before the rollover that is
// neither in generation gen nor kept, then proves each gone.
func (r *Replica) deleteAllBut(ctx context.Context, keys []string, gen int64, keep map[string]bool) error {
	var gone []string
	for _, k := range keys {
		if g, _, _, _, ok := parseKey(k); (ok && g == gen) || keep[k] || k == headKey {
			continue
		}
		if err := r.cfg.Store.Delete(ctx, k); err != nil {
			return fmt.Errorf("replica: delete an old object from %s: %w", r.cfg.Store, err)
		}
		gone = append(gone, k)
	}
	// A directory also holds the temporary files of uploads a crash cut
	// off; one may be a shard with a key since destroyed.
	if d, ok := r.cfg.Store.(interface {
		RemoveStaleTemps(time.Duration) (int, error)
	}); ok {
		if _, err := d.RemoveStaleTemps(0); err != nil {
			return fmt.Errorf("replica: remove cut-off uploads from %s: %w", r.cfg.Store, err)
		}
	}
	crashpoint.Hit(crashpoint.ReplicaAfterDeletes)
	for _, k := range gone {
		if _, err := r.cfg.Store.Stat(ctx, k); !errors.Is(err, objstore.ErrNotFound) {
			if err == nil {
				err = errors.New("the target still holds an object it was told to delete")
			}
			return fmt.Errorf("replica: prove an old object gone from %s: %w", r.cfg.Store, err)
		}
	}
	return nil
}

package replica

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
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
	err = r.rollLocked(ctx, func(st *state) rolloverMode {
		if r.compactDue(st) {
			return compact
		}
		return forget
	})
	if err == nil {
		r.forgot = covered
	}
	return err
}

// rollLocked rolls the replica over, its lock held: what a cut left
// settled first, then a whole generation when one is needed, else the
// mode mode picks.
func (r *Replica) rollLocked(ctx context.Context, mode func(*state) rolloverMode) error {
	st, err := r.loadState(ctx)
	if err != nil {
		return err
	}
	if err := r.settle(ctx, st); err != nil {
		r.note(err)
		return err
	}
	m := full
	if r.needsGeneration(ctx, st) == "" {
		m = mode(st)
	}
	if st != nil && st.Restored && m != full {
		r.carryOn(st)
	}
	err = r.rollover(ctx, st, m)
	r.note(err)
	return err
}

// Compact writes a generation that cuts again every shard holding a row
// changed since its base, with no segment and no fold, and trims the
// catalog's change log to it: after a tenant's delete, neither the
// replica's objects hold its rows nor the log their keys (docs/FORMAT.md,
// "Tenant delete", step 4).
func (r *Replica) Compact(ctx context.Context) error {
	unlock, err := r.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return r.rollLocked(ctx, func(*state) rolloverMode { return compact })
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
// name, in the steps of docs/FORMAT.md, "Replica rollover", each followed
// by its crash point. It runs under lock.
func (r *Replica) rollover(ctx context.Context, st *state, mode rolloverMode) error {
	// 1. List every object; stop at another catalog's replica.
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
	// 2. Record the new generation as pending: a number is never taken twice.
	gen := max(st.Gen, st.Pending, st.Used, maxGen) + 1
	st.Pending = gen
	if err := r.saveState(ctx, st, 0); err != nil {
		return err
	}
	crashpoint.Hit(crashpoint.ReplicaAfterPending)

	// 3. In one read transaction: the shards cut again, and the fold.
	m, schemaFP, total, err := r.writeShards(ctx, st, mode, gen)
	if err != nil {
		return fmt.Errorf("replica: write generation %d to %s: %w", gen, r.cfg.Store, err)
	}
	crashpoint.Hit(crashpoint.ReplicaAfterShards)

	// 4. The manifest, last; then the head names it.
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
	if err := r.writeHead(ctx, gen, manifestKey(gen), mw.sum, m.Seq, false); err != nil {
		return err
	}
	crashpoint.Hit(crashpoint.ReplicaAfterNewHead)

	// 5. The record names the new generation, its deletes still to do
	// (Stale) until they are proven done: a process cut off between the
	// two finishes them at its next step, so no object sealed under a
	// rotated key, or holding a destroyed one, outlives a crash (a purge's
	// own rollover is done again by the sweep; a rotation's is not).
	next := &state{
		Target: r.cfg.Store.String(), Gen: gen, Base: m.Base, Uploaded: m.Seq,
		Schema: schemaFP, KeyCheck: m.KeyCheck, Tables: m.Tables, Stale: true,
		Format: chainFormat, Last: manifestKey(gen), LastHash: mw.sum,
	}
	trim := int64(0) // the log up to seq goes in the same transaction when base is seq
	if m.Base == m.Seq {
		trim = m.Seq
	}
	if err := r.saveState(ctx, next, trim); err != nil {
		return err
	}
	crashpoint.Hit(crashpoint.ReplicaAfterRecord)
	// 6 and 7. Delete what the new generation does not name, then prove it
	// gone (replica-after-deletes falls between the two).
	if err := r.deleteAllBut(ctx, existing, gen, keptShards(m.Tables)); err != nil {
		return err
	}
	// 8. The record without Stale: only now is the rollover done.
	next.Stale = false
	if err := r.saveState(ctx, next, 0); err != nil {
		return err
	}
	r.cfg.Log.Info("replica: generation written", "generation", gen, "replicated", m.Seq, "bytes", total)
	return nil
}

// writeShards is step 3 of a rollover to generation gen: in one read
// transaction, at the change number seq it reads at, it writes the fold of
// a purge's rollover (seg-<base+1>-<seq>: every row changed since base, as
// it is now), plans the shards (the fold's rows, or a compaction's changed
// keys, choose those cut again) and cuts them. It returns the manifest to
// write, the schema's fingerprint and the bytes written.
func (r *Replica) writeShards(ctx context.Context, st *state, mode rolloverMode, gen int64) (*manifest, string, int64, error) {
	m := &manifest{Format: chainFormat, Gen: gen, Made: time.Now().UTC(), KeyCheck: r.cfg.Key.CheckValue()}
	var schemaFP string
	var total int64
	err := r.cfg.Cat.Read(ctx, func(v *catalog.View) error {
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
		pl := newPlanner(mode, st, now)
		switch {
		case pl.mode == forget && seq > st.Base:
			key := segmentKey(gen, st.Base+1, seq)
			w, err := r.s.put(ctx, r.cfg.Store, key, func(w io.Writer) error {
				return writeChanges(w, v, link{}, tablesOf(now), pl.watched, st.Base, seq, pl.changed)
			})
			if err != nil {
				return fmt.Errorf("write the fold: %w", err)
			}
			total += w.n
			r.objects.Add(1)
			m.Fold, m.FoldHash = key, w.sum
		case pl.mode == compact:
			if err := v.Changes(st.Base, seq, pl.changedKey); err != nil {
				return err
			}
		}
		plan, err := pl.plan(seq)
		if err != nil {
			return err
		}
		m.Base = plan.base
		for _, tp := range plan.tables {
			shards, n, err := r.cutTable(ctx, v, gen, tp)
			if err != nil {
				return err
			}
			total += n
			m.Tables = append(m.Tables, table{RepTable: tp.RepTable, Shards: shards})
		}
		return nil
	})
	return m, schemaFP, total, err
}

func tablesOf(ts []catalog.RepTable) []table {
	out := make([]table, len(ts))
	for i, t := range ts {
		out[i] = table{RepTable: t}
	}
	return out
}

// cutTable carries out the plan of one table: its kept shards as they
// are, each range to cut again read and written as new shards of gen
// (split when it grew).
func (r *Replica) cutTable(ctx context.Context, v *catalog.View, gen int64, tp tablePlan) ([]shard, int64, error) {
	var out []shard
	var total int64
	for _, s := range tp.steps {
		if s.keep != nil {
			out = append(out, *s.keep)
			continue
		}
		shards, n, err := r.cutRange(ctx, v, gen, tp.RepTable, s.lo, s.hi)
		if err != nil {
			return nil, 0, err
		}
		total += n
		if len(shards) > 0 && s.bound != nil {
			shards[0].Lo = s.bound // the range keeps its bound even if its first row went
		}
		out = append(out, shards...)
	}
	if !tp.whole && len(out) > 0 {
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

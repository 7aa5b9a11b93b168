// Package replica keeps a sealed copy of the catalog in a bucket or a
// directory on another disk, so that losing the host loses no data key
// (docs/FORMAT.md, "Replica"; docs/disaster-recovery.md).
//
// The copy is a chain of generations. A generation's manifest names the
// shards that hold every carried table as of a base point of the catalog's
// change log, and the segments after it hold the rows that changed since,
// with their values at the time each was cut. A segment is cut as often as
// max_lag asks; a rollover writes a new generation and deletes every object
// the new one does not name, so a destroyed data key survives in no object
// once a purge's rollover is done.
package replica

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/seal"
)

// LockName is the file in the data directory whose lock one process holds
// while it writes to the replica: the server and a CLI command never cut
// segments, or roll over, at once.
const LockName = "replica.lock"

// shardRows is the most rows a rollover writes into one shard.
const shardRows = 4096

// Config says where the replica goes and what it copies.
type Config struct {
	Store   objstore.Store
	Cat     *catalog.Catalog
	Key     *seal.MasterKey
	DataDir string
	MaxLag  time.Duration
	Log     *slog.Logger
}

// Replica replicates one catalog. Its methods are safe for concurrent use.
type Replica struct {
	cfg Config
	s   sealer

	turn    chan struct{} // one replica step at a time in this process (a token, so a wait can end with its context); the lock file across processes
	endMu   sync.Mutex    // guards stepEnd
	forgets atomic.Int64
	forgot  int64  // forget requests a finished rollover covers (in turn)
	schema  string // the catalog's schema fingerprint, read once (in turn)
	// The head's slot the next cut rewrites in place, in a target that
	// can (chain.go); -1: the next head is written whole (in turn).
	nextSlot int
	wake     chan struct{}
	stepEnd  chan struct{} // closed and replaced whenever a step ends

	// With max_lag 0: the writes let in and not yet done, those of them
	// asking for their acknowledgement, and a signal when either changes
	// (progress.go, gatherWrites).
	admitted atomic.Int64
	asking   atomic.Int64
	arrived  chan struct{}

	behindSince atomic.Int64 // Unix nanos since the oldest change not replicated was seen; 0: caught up
	seenMu      sync.Mutex
	seen        []sighting // changes seen and not yet replicated, oldest first
	lastErr     atomic.Pointer[error]

	// The newest segment's progress, and whether a save of it runs
	// (progress.go); saveMu orders the saves of the record.
	unsaved atomic.Pointer[progress]
	saving  atomic.Bool
	saveMu  sync.Mutex
	// The record as last read, and its bytes: a step reads the record
	// again, and decodes it only when another process or a rollover has
	// written it since (its shard list grows with the catalog).
	decoded atomic.Pointer[decodedState]

	gen      atomic.Int64
	uploaded atomic.Int64
	bytes    atomic.Int64
	objects  atomic.Int64
}

// sighting is the log's last change as measure saw it, and when.
type sighting struct {
	seq int64
	at  time.Time
}

// ErrBehind is wrapped by the errors of writes refused or left
// unacknowledged because the replica is behind.
var ErrBehind = errors.New("the catalog's replica is behind")

// New makes the replica of cfg.Cat; Run or Sync does the work.
func New(cfg Config) *Replica {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Replica{cfg: cfg, s: sealer{key: cfg.Key, catalog: cfg.Cat.ID}, turn: make(chan struct{}, 1), nextSlot: -1, arrived: make(chan struct{}, 1), wake: make(chan struct{}, 1), stepEnd: make(chan struct{})}
}

// String names the target for operators.
func (r *Replica) String() string { return r.cfg.Store.String() }

// Target is the store the replica writes to. Its replica/ folder is the
// replica's; the audit logs' copies take logs/ beside it
// (auditlog.Copier), which no step of the replica lists.
func (r *Replica) Target() objstore.Store { return r.cfg.Store }

// MaxLag is the configured promise.
func (r *Replica) MaxLag() time.Duration { return r.cfg.MaxLag }

// Enable makes the catalog log its changes for the replica. Every process
// with a [replica] calls it before its first write.
func (r *Replica) Enable(ctx context.Context) error { return r.cfg.Cat.EnableChangeLog(ctx) }

// state is the replica's record in the catalog (replica_state): what the
// newest generation holds and how far the segments after it reach.
type state struct {
	Target   string  `json:"target"`
	Gen      int64   `json:"gen"`
	Base     int64   `json:"base"`     // the log point the shards were cut at, at the latest
	Uploaded int64   `json:"uploaded"` // the log point the replica holds
	Pending  int64   `json:"pending,omitempty"`
	Segments int     `json:"segments"`        // segments since the manifest
	Stale    bool    `json:"stale,omitempty"` // a rollover's deletes of older objects are not yet proven done
	Used     int64   `json:"used,omitempty"`  // the highest generation number a rollover took, an abandoned one's included
	Schema   string  `json:"schema"`
	KeyCheck []byte  `json:"key_check"`
	Tables   []table `json:"tables"`
	// The chain (docs/FORMAT.md, "Replica objects"): 2 once the
	// generation's segments name their predecessor and the head is
	// written; the newest object of the generation and its SHA-256.
	Format   int    `json:"format,omitempty"`
	Last     string `json:"last,omitempty"`
	LastHash []byte `json:"last_hash,omitempty"`
	// A catalog rebuilt by restore: its log holds only the changes after
	// LogFrom, so its next rollover cuts every shard; Restored until its
	// first step says it carries on; Rewrite, when the restore accepted a
	// loss, why that step writes a whole generation instead.
	LogFrom  int64  `json:"log_from,omitempty"`
	Restored bool   `json:"restored,omitempty"`
	Rewrite  string `json:"rewrite,omitempty"`
}

// chainFormat is the manifest format of a generation whose segments name
// their predecessor and whose newest object the head names.
const chainFormat = 2

type table struct {
	catalog.RepTable
	Shards []shard `json:"shards"`
}

// shard holds the rows of its table from Lo (nil: the first) up to the
// next shard's Lo.
type shard struct {
	Lo   []byte `json:"lo,omitempty"`
	Key  string `json:"key"`
	Rows int    `json:"rows"`
}

// manifest is a generation's table of contents.
type manifest struct {
	Format   int                  `json:"format"`
	Gen      int64                `json:"gen"`
	Base     int64                `json:"base"`
	Seq      int64                `json:"seq"`                 // the log point it was made at; a fold segment covers Base+1..Seq
	Fold     string               `json:"fold,omitempty"`      // the fold's key (format 2)
	FoldHash []byte               `json:"fold_hash,omitempty"` // the SHA-256 of its bytes
	Made     time.Time            `json:"made"`
	KeyCheck []byte               `json:"key_check"`
	Schema   []catalog.SchemaItem `json:"schema"`
	Tables   []table              `json:"tables"`
}

// advance takes p's reach when p is of st's generation and reaches
// further.
func (st *state) advance(p *progress) {
	if p != nil && p.Gen == st.Gen && p.Uploaded > st.Uploaded {
		st.Uploaded, st.Segments, st.Last, st.LastHash = p.Uploaded, p.Segments, p.Last, p.LastHash
	}
}

// decodedState is a record and the bytes it was decoded from; neither
// changes once stored.
type decodedState struct {
	raw []byte
	st  state
}

// progress is what each segment changes of the record.
type progress struct {
	Gen      int64  `json:"gen"`
	Uploaded int64  `json:"uploaded"`
	Segments int    `json:"segments"`
	Last     string `json:"last,omitempty"`
	LastHash []byte `json:"last_hash,omitempty"`
}

func (r *Replica) loadState(ctx context.Context) (*state, error) {
	// Read before the catalog: a save that ends in between clears it
	// only once the catalog holds it.
	unsaved := r.unsaved.Load()
	b, pb, err := r.cfg.Cat.ReplicaState(ctx)
	if err != nil || b == nil {
		return nil, err
	}
	st := &state{}
	if d := r.decoded.Load(); d != nil && bytes.Equal(d.raw, b) {
		*st = d.st // its slices are only ever replaced, never written into
	} else {
		if err := json.Unmarshal(b, st); err != nil {
			return nil, fmt.Errorf("replica: the catalog's replica record is damaged: %w", err)
		}
		r.decoded.Store(&decodedState{raw: b, st: *st})
	}
	if pb != nil {
		var p progress
		if err := json.Unmarshal(pb, &p); err != nil {
			return nil, fmt.Errorf("replica: the catalog's replica record is damaged: %w", err)
		}
		st.advance(&p)
	}
	// This process's newest segment, which the catalog may not hold yet.
	st.advance(unsaved)
	return st, nil
}

// note records the outcome of a step for Admit and the metrics.
func (r *Replica) note(err error) {
	if err != nil {
		r.lastErr.Store(&err)
		return
	}
	r.lastErr.Store(nil)
}

// step brings the replica up to want at least: a whole new generation
// when the record asks for one, else one segment. It runs under lock.
func (r *Replica) step(ctx context.Context, want int64) error {
	st, err := r.loadState(ctx)
	if err != nil {
		return err
	}
	if err := r.settle(ctx, st); err != nil {
		return err
	}
	if why := r.needsGeneration(ctx, st); why != "" {
		r.cfg.Log.Info("replica: writing a whole generation", "reason", why)
		return r.rollover(ctx, st, full)
	}
	if st.Restored {
		r.carryOn(st)
		if err := r.saveState(ctx, st, 0); err != nil {
			return err
		}
	}
	r.gen.Store(st.Gen)
	r.uploaded.Store(st.Uploaded)
	if st.Uploaded >= want {
		return nil
	}
	if err := r.cutSegment(ctx, st); err != nil {
		return err
	}
	if r.compactDue(st) {
		return r.rollover(ctx, st, compact)
	}
	return nil
}

// carryOn says, at the first step on a catalog that restore rebuilt, that
// the replica goes on from the generation restored (a purge's rollover
// may be that step: its generation follows the restored one).
func (r *Replica) carryOn(st *state) {
	r.cfg.Log.Info("replica: carrying on the restored generation", "generation", st.Gen, "replicated", st.Uploaded)
	st.Restored = false
}

// needsGeneration says why the record cannot take a segment; "" when it can.
func (r *Replica) needsGeneration(ctx context.Context, st *state) string {
	switch {
	case st == nil || st.Gen == 0:
		return "no generation yet"
	case st.Target != r.cfg.Store.String():
		return "the target changed"
	case string(st.KeyCheck) != string(r.cfg.Key.CheckValue()):
		return "the master key changed"
	case st.Rewrite != "":
		return st.Rewrite
	case st.Format < chainFormat:
		return "the generation was written before segments named their predecessor"
	}
	// Migrations run when a process opens the catalog, so one reading of
	// the schema holds for the process's life.
	if r.schema == "" {
		err := r.cfg.Cat.Read(ctx, func(v *catalog.View) error {
			var err error
			_, r.schema, err = v.Schema()
			return err
		})
		if err != nil {
			return ""
		}
	}
	if r.schema != st.Schema {
		return "the catalog's schema changed"
	}
	return ""
}

// compactDue: a rollover folds what the segments carry into the shards
// once they hold an eighth of the catalog (and at least 50,000 changes),
// or too many segments make a restore slow.
func (r *Replica) compactDue(st *state) bool {
	rows := 0
	for _, t := range st.Tables {
		for _, s := range t.Shards {
			rows += s.Rows
		}
	}
	return st.Uploaded-st.Base > max(50_000, int64(rows/8)) || st.Segments >= 1000
}

// cutSegment writes the rows changed after st.Uploaded, as of now, as one
// segment of the current generation that names the one before it, then
// the head that names it; the record follows (progress.go).
func (r *Replica) cutSegment(ctx context.Context, st *state) error {
	tables := map[string]catalog.RepTable{}
	for _, t := range st.Tables {
		tables[t.Name] = t.RepTable
	}
	var last int64
	var w written
	var key string
	err := r.cfg.Cat.Read(ctx, func(v *catalog.View) error {
		var err error
		if last, err = v.LastChange(); err != nil || last <= st.Uploaded {
			return err
		}
		key = segmentKey(st.Gen, st.Uploaded+1, last)
		w, err = r.s.put(ctx, r.cfg.Store, key, func(out io.Writer) error {
			return writeChanges(out, v, link{key: st.Last, sum: st.LastHash}, st.Tables, tables, st.Uploaded, last, nil)
		})
		return err
	})
	if errors.Is(err, objstore.ErrExists) {
		// A process cut it and stopped before recording it: from the same
		// record, so it names the same predecessor.
		w.sum, err = r.s.hashOf(ctx, r.cfg.Store, key)
	}
	if err != nil {
		return fmt.Errorf("replica: write a segment to %s: %w", r.cfg.Store, err)
	}
	if last <= st.Uploaded {
		return nil
	}
	r.bytes.Add(w.n)
	r.objects.Add(1)
	crashpoint.Hit(crashpoint.ReplicaAfterSegment)
	if err := r.writeHead(ctx, st.Gen, key, w.sum, last, true); err != nil {
		return err
	}
	crashpoint.Hit(crashpoint.ReplicaAfterHead)
	st.Uploaded = last
	st.Segments++
	st.Last, st.LastHash = key, w.sum
	r.unsaved.Store(&progress{Gen: st.Gen, Uploaded: st.Uploaded, Segments: st.Segments, Last: st.Last, LastHash: st.LastHash})
	r.uploaded.Store(last)
	return nil
}

// writeChanges writes a segment body: the object before it in the chain
// (none for a fold, which its manifest names), the tables it may name,
// then, for every row the log notes after `after` up to `upto`, its value
// now or its deletion. visit sees each row read (nil when gone).
func writeChanges(w io.Writer, v *catalog.View, prev link, list []table, tables map[string]catalog.RepTable, after, upto int64, visit func(t catalog.RepTable, key, row []any) error) error {
	e := newEncoder(w)
	e.bytes([]byte(prev.key))
	e.bytes(prev.sum)
	index := map[string]int{}
	e.uvarint(uint64(len(list)))
	for i, t := range list {
		index[t.Name] = i
		e.bytes([]byte(t.Name))
		e.uvarint(uint64(len(t.Cols)))
		for _, c := range t.Cols {
			e.bytes([]byte(c))
		}
		e.uvarint(uint64(len(t.Key)))
		for _, k := range t.Key {
			e.uvarint(uint64(k))
		}
	}
	changed, err := v.ChangedTables(after, upto)
	if err != nil {
		return err
	}
	for _, lt := range list {
		t, ok := tables[lt.Name]
		if !ok || !changed[lt.Name] {
			continue // unchanged, or a table the replica does not carry
		}
		err := v.ChangedRows(t, after, upto, func(key, row []any) error {
			if visit != nil {
				if err := visit(t, key, row); err != nil {
					return err
				}
			}
			if row == nil {
				e.byte(recDelete)
				e.uvarint(uint64(index[t.Name]))
				e.values(key)
			} else {
				e.byte(recPut)
				e.uvarint(uint64(index[t.Name]))
				e.values(row)
			}
			return e.err
		})
		if err != nil {
			return err
		}
	}
	e.byte(recEnd)
	return e.flush()
}

package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/config"
	"github.com/vcon-server/vcon-server/internal/durable"
	"github.com/vcon-server/vcon-server/internal/metrics"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/replica"
	"github.com/vcon-server/vcon-server/seal"
)

// msgNoReplica is serve's warning, and check's, without a [replica] table.
const msgNoReplica = "the catalog is the only copy of the data keys: losing this disk loses every version; add a [replica] table (docs/disaster-recovery.md)"

// openReplicaStore opens the replica's target: a directory, or a bucket
// vetted as Parquet storage's is, since a versioned bucket or Object Lock
// would keep a destroyed key's old objects (docs/disaster-recovery.md).
func openReplicaStore(ctx context.Context, cfg *config.Config, vet bool) (objstore.Store, error) {
	rc := cfg.Replica
	if rc.To != "s3" {
		if err := os.MkdirAll(rc.To, 0o700); err != nil {
			return nil, fmt.Errorf("replica.to: %w", err)
		}
		return objstore.NewDir(rc.To)
	}
	table := "replica.s3"
	if rc.S3 == cfg.Storage.S3 || (cfg.Storage.S3 != nil && *rc.S3 == *cfg.Storage.S3) {
		table = "storage.s3"
	}
	client, err := NewS3Client(table, rc.S3)
	if err != nil {
		return nil, err
	}
	spool := objstore.SpoolDir(cfg.DataDir)
	if err := os.MkdirAll(spool, 0o700); err != nil {
		return nil, err
	}
	s := objstore.NewS3(client, rc.S3.Bucket, rc.S3.Prefix, spool)
	if !vet {
		return s, nil
	}
	bucket := rc.S3.Bucket
	locked, err := s.ObjectLock(ctx)
	if err != nil {
		return nil, fmt.Errorf("the replica cannot be used: reading the Object Lock setting of bucket %q: %w", bucket, err)
	}
	if locked {
		return nil, fmt.Errorf("the replica cannot be used: bucket %q has Object Lock on, which can refuse to delete a replica object that holds a destroyed key; use a bucket without Object Lock for [replica]", bucket)
	}
	status, err := s.Versioning(ctx)
	if err != nil {
		return nil, fmt.Errorf("the replica cannot be used: reading the versioning of bucket %q: %w", bucket, err)
	}
	if status != "" {
		return nil, fmt.Errorf("the replica cannot be used: bucket %q has versioning %s, which keeps a deleted replica object's bytes, destroyed keys included, as an earlier version; use a bucket that was never versioned (%s.allow_versioning does not apply to the replica)", bucket, status, table)
	}
	return s, nil
}

// openReplica makes the replica of cat and turns the catalog's change log
// on; nil without [replica].
func openReplica(ctx context.Context, cfg *config.Config, mk *seal.MasterKey, cat *catalog.Catalog, log *slog.Logger, vet bool) (*replica.Replica, error) {
	if cfg.Replica == nil {
		return nil, nil
	}
	store, err := openReplicaStore(ctx, cfg, vet)
	if err != nil {
		return nil, err
	}
	r := replica.New(replica.Config{Store: store, Cat: cat, Key: mk, DataDir: cfg.DataDir, MaxLag: cfg.Replica.MaxLag, Log: log})
	if err := r.Enable(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// syncReplica is run after every command that opened the catalog: a
// change it made returns only once it is in the replica, whether a
// server runs or not.
func (e *env) syncReplica() error {
	cfg := e.opened
	if cfg == nil || cfg.Replica == nil {
		return nil
	}
	if cat, err := catalog.Open(e.ctx, cfg.DataDir); err != nil {
		return nil // no catalog: nothing to copy
	} else {
		pending, err := replica.Pending(e.ctx, cat)
		cat.Close()
		if err != nil || !pending {
			return err
		}
	}
	mk, cat, err := openKeyed(e.ctx, cfg)
	if err != nil {
		return err
	}
	defer cat.Close()
	// Vetted as at serve's start: the bucket may have been versioned since,
	// and a segment holds whole rows, wrapped keys included.
	r, err := openReplica(e.ctx, cfg, mk, cat, nil, true)
	if err != nil {
		return fmt.Errorf("the change is committed in the catalog but not in the replica: %w", err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	if err := r.Sync(ctx); err != nil {
		return fmt.Errorf("the change is committed in the catalog but not yet in the replica %s: %v; the server copies it once the target answers (vcon-server check shows the replica's state)", r, err)
	}
	return nil
}

func init() {
	var opts replica.Options
	var witnessed savedFlags
	register(&command{
		name:    "restore",
		summary: "rebuild the catalog of an empty data directory from the newest generation of the [replica], then start serve",
		flags: func(fs *flag.FlagSet) {
			opts = replica.Options{}
			fs.Int64Var(&opts.AtLeast, "at-least", 0, "refuse a replica behind this change number (the replicated number check, /metrics and the replica's log show)")
			fs.BoolVar(&opts.AcceptLoss, "accept-loss", false, "restore a replica that lacks changes all the same, and record what was lost in the admin log")
			witnessed = nil
			fs.Var(&witnessed, "checkpoint", "refuse a replica whose audit log does not extend this checkpoint a witness or tenant kept (GET /audit/log/checkpoint); any number of times")
		},
		run: func(e *env, _ *flag.FlagSet, _ []string) error { return runRestore(e, opts, witnessed) },
	})
}

// runRestore rebuilds catalog.db from the replica (docs/disaster-recovery.md):
// into a temporary file, checked whole and against the master key, then
// put in place; the next serve's start-up recovery does the rest.
func runRestore(e *env, opts replica.Options, witnessed []string) error {
	cfg, err := e.loadConfig()
	if err != nil {
		return err
	}
	if cfg.Replica == nil {
		return fmt.Errorf("restore reads the replica a [replica] table names, and %s has none", cfg.Path)
	}
	path := filepath.Join(cfg.DataDir, catalog.FileName)
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("the data directory %s already has a catalog, %s; restore writes only where there is none: move it away first if it is the one to replace", cfg.DataDir, path)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return err
	}
	unlock, err := catalog.Lock(cfg.DataDir)
	if errors.Is(err, catalog.ErrLocked) {
		return fmt.Errorf("a vcon-server serve holds the data directory %s; stop it first", cfg.DataDir)
	}
	if err != nil {
		return err
	}
	defer unlock()
	mk, _, err := loadMasterKey(e.ctx, cfg)
	if err != nil {
		return err
	}
	store, err := openReplicaStore(e.ctx, cfg, false)
	if err != nil {
		return err
	}
	removeRestoreScratch(cfg.DataDir)
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := filepath.Join(cfg.DataDir, restoreScratch+hex.EncodeToString(rnd[:]))
	defer removeRestoreScratch(cfg.DataDir)
	start := time.Now()
	if opts.AtLeast < 0 {
		return usageError{fmt.Sprintf("--at-least %d: a change number is 0 or more", opts.AtLeast)}
	}
	res, err := replica.Restore(e.ctx, store, mk, tmp, opts)
	if errors.Is(err, seal.ErrDamaged) {
		return fmt.Errorf("restore from %s: %w; restore needs the master key the replica was sealed under, the lost host's, at master_key (%s), not a key made anew: put that file in place and run restore again (with that key in place, this means the object is damaged)", store, err, cfg.MasterKey)
	}
	if err != nil {
		return fmt.Errorf("restore from %s: %w", store, err)
	}
	if err := checkWitnessed(e.ctx, tmp, witnessed); err != nil {
		return fmt.Errorf("restore from %s: %w; nothing was restored", store, err)
	}
	if err := durable.Link(tmp, path); err != nil {
		return fmt.Errorf("restore: put the catalog in place: %w", err)
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(e.stderr, "vcon-server: warning: %s\n", w)
	}
	if res.Lost != nil {
		fmt.Fprintf(e.stderr, "vcon-server: warning: restored without %s (%s); the admin log records it\n", res.Lost.Range(), res.Lost.What)
	}
	fmt.Fprintf(e.stderr, "vcon-server: restored the catalog from generation %d of %s (made %s) up to change %d in %s; start the server: its start-up recovery destroys the keys of versions purged since, and finds moved pack files\n",
		res.Generation, store, res.Made.Format(time.RFC3339), res.Replicated, time.Since(start).Round(time.Millisecond))
	out := map[string]any{"restored": path, "generation": res.Generation, "replicated": res.Replicated, "shards": res.Shards, "segments": res.Segments, "rows": res.Rows}
	if res.Lost != nil {
		out["lost"] = res.Lost
	}
	return e.emit(out)
}

// restoreScratch starts the name of the catalog a restore is building.
const restoreScratch = "." + catalog.FileName + ".restore-"

// removeRestoreScratch removes what a killed restore left: a partial
// catalog, which holds wrapped keys. restore and serve call it first.
func removeRestoreScratch(dataDir string) int {
	left, _ := filepath.Glob(filepath.Join(dataDir, restoreScratch+"*"))
	n := 0
	for _, p := range left {
		if os.Remove(p) == nil {
			n++
		}
	}
	return n
}

// replicaMetrics returns the function that copies the replica's state
// into /metrics (docs/api.md, "Metrics").
func replicaMetrics(reg *metrics.Registry, r *replica.Replica) func(context.Context) {
	lag := reg.NewGauge("vcon_replica_lag_seconds", "How long the oldest catalog change not yet in the replica has waited (0: none waits).")
	last := reg.NewGauge("vcon_replica_replicated_change", "The last change of the catalog's change log that the replica holds.")
	gen := reg.NewGauge("vcon_replica_generation", "The replica's newest generation.")
	up := reg.NewCounter("vcon_replica_uploaded_bytes_total", "Bytes this server wrote to the replica.")
	puts := reg.NewCounter("vcon_replica_uploaded_objects_total", "Objects this server wrote to the replica (PUTs), the head's rewrites included.")
	failing := reg.NewGauge("vcon_replica_failing", "1 while the replica's last write failed.")
	var sent, put int64
	return func(context.Context) {
		st := r.Status()
		lag.Set(st.Lag.Seconds())
		last.Set(float64(st.Replicated))
		gen.Set(float64(st.Generation))
		up.Add(float64(st.Bytes - sent))
		puts.Add(float64(st.Objects - put))
		sent, put = st.Bytes, st.Objects
		f := 0.0
		if st.Error != "" {
			f = 1
		}
		failing.Set(f)
	}
}

// checkReplica is check's last line: the replica read as a restore would
// read it, or the warning that there is none. It returns the problems.
func (e *env) checkReplica(cfg *config.Config, mk *seal.MasterKey, cat *catalog.Catalog) (int, error) {
	if cfg.Replica == nil {
		return 0, e.emit(map[string]any{"replica": nil, "warning": msgNoReplica})
	}
	r, err := openReplica(e.ctx, cfg, mk, cat, nil, false)
	if err != nil {
		return 0, err
	}
	st, problems, err := r.Verify(e.ctx)
	if err != nil {
		return 0, err
	}
	if problems == nil {
		problems = []string{}
	}
	return len(problems), e.emit(map[string]any{"replica": map[string]any{
		"target": st.Target, "generation": st.Generation, "replicated": st.Replicated, "problems": problems,
	}})
}

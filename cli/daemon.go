package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/config"
	"github.com/vcon-server/vcon-server/diskspace"
	"github.com/vcon-server/vcon-server/export"
	"github.com/vcon-server/vcon-server/internal/metrics"
	"github.com/vcon-server/vcon-server/internal/reserve"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/replica"
	"github.com/vcon-server/vcon-server/server"
	"github.com/vcon-server/vcon-server/webhook"
)

// Daemon is a running server: the HTTPS listener, the purge sweep, the
// pack runs and the search indexer, and the catalog and lock they hold.
// Tests start it in-process; serve runs one until a signal.
type Daemon struct {
	Archive *archive.Archive
	Cat     *catalog.Catalog
	Log     *slog.Logger
	// Metrics is what GET /metrics shows; pack runs and sweeps count into
	// it (Metrics.PackRun, Metrics.Swept).
	Metrics *server.Metrics
	// Disk is the data directory's free space against min_free.
	Disk  *diskspace.Monitor
	probe storeProbe // whether the object store answers, for /health
	// Replica is the catalog's replica; nil without [replica].
	Replica *replica.Replica

	unlock  func()
	ln      net.Listener
	srv     *http.Server
	stop    context.CancelFunc
	wg      sync.WaitGroup
	sweepMu sync.Mutex
	packMu  sync.Mutex
	lookMu  sync.Mutex
	started time.Time // before start-up recovery, by the clock of retention
}

// Options adjust a Daemon for tests.
type Options struct {
	Now      func() time.Time // the clock of retention; time.Now when nil
	Listener net.Listener     // instead of listening on cfg.Listen
	Limits   server.Limits    // timeouts and the authentication limit; defaults when zero
	Webhooks webhook.Policy   // the webhook sender's retries; webhook.DefaultPolicy when zero
}

// Start opens everything serve needs, repairs what a crash left, and
// starts answering. Every refusal says what is wrong and what to do.
func Start(ctx context.Context, cfg *config.Config, log *slog.Logger, opt Options) (*Daemon, error) {
	d := &Daemon{Log: log}
	ok := false
	defer func() {
		if !ok {
			d.release()
		}
	}()
	if err := cfg.CheckFiles(true); err != nil {
		return nil, err
	}
	unlock, err := catalog.Lock(cfg.DataDir)
	if errors.Is(err, catalog.ErrLocked) {
		return nil, fmt.Errorf("another vcon-server serve is running on the data directory %s; stop it first", cfg.DataDir)
	}
	if err != nil {
		return nil, err
	}
	d.unlock = unlock
	// What a crash left that only takes room goes first, before the
	// catalog opens: on a full disk its blocks are the room the catalog
	// needs to open (its shared-memory file) and to commit.
	if n, err := objstore.RemoveStaleSpool(cfg.DataDir, time.Hour); err != nil {
		return nil, err
	} else if n > 0 {
		log.Info("start-up recovery removed spool files a crash left", "removed", n)
	}
	if n := removeRestoreScratch(cfg.DataDir); n > 0 {
		log.Info("start-up recovery removed the partial catalog of a killed restore", "removed", n)
	}
	// A killed export's scratch folder goes now, not at the next export:
	// it may hold the live ids of its tenant.
	if n := export.RemoveStaleScratch(objstore.SpoolDir(cfg.DataDir)); n > 0 {
		log.Info("start-up recovery removed the scratch folders of killed exports", "removed", n)
	}
	mk, cat, err := openKeyed(ctx, cfg)
	if err != nil {
		return nil, err
	}
	d.Cat = cat
	now := opt.Now
	if now == nil {
		now = time.Now
	}
	cat.Now = now
	if d.Replica, err = openReplica(ctx, cfg, mk, cat, log, true); err != nil {
		return nil, err
	}
	if d.Replica != nil {
		if err := d.Replica.Vet(ctx); err != nil {
			return nil, err
		}
	} else {
		log.Warn(msgNoReplica)
		// On a full disk this waits for the next start: the change log it
		// clears only takes room, and serve must start there to free it.
		if err := cat.DisableChangeLog(ctx); reserve.IsFull(err) {
			log.Warn("start-up: the data directory's disk is full; the catalog's change log is cleared at a later start", "error", err.Error())
		} else if err != nil {
			return nil, err
		}
	}
	reg := metrics.NewRegistry()
	d.Metrics = server.NewMetrics(reg)
	d.Disk = newDiskMonitor(cfg, log, reg)
	d.Archive, err = openArchive(ctx, cfg, mk, cat, parts{
		serve: true, log: log, now: now, purged: d.Metrics.Purged,
		// Every object-store call from here on, recovery's included, is
		// counted by call and outcome.
		wrap:    func(s objstore.Store) objstore.Store { return spareStore(cfg, objstore.NewMetered(s, reg)) },
		replica: d.Replica,
	})
	if err != nil {
		return nil, err
	}
	if n, err := cat.ResetSearchKeys(ctx, mk.CheckValue()); err != nil {
		return nil, err
	} else if n > 0 {
		log.Info("search indexes made under another master key will be built again", "tenants", n)
	}
	// A catalog made before erasures has no receipt signing key yet.
	if made, err := archive.EnsureSigningKey(ctx, cat, mk); err != nil {
		return nil, err
	} else if made {
		log.Info("made the signing key of erasure receipts")
	}
	// Every version id made from here on is of this process: only older
	// objects can be orphans (the background look below).
	d.started = now()
	rec, err := d.Archive.Recover(ctx)
	if err != nil {
		return nil, fmt.Errorf("start-up recovery: %w", err)
	}
	if rec != (archive.Recovery{}) {
		log.Info("start-up recovery",
			"keys_destroyed_again", rec.Tombstoned, "purges_finished", rec.PurgesEnded,
			"pack_files_removed", rec.PackFiles,
			"pack_files_adopted", rec.Adopted, "versions_repointed", rec.Repointed)
	}

	cert, err := tls.LoadX509KeyPair(cfg.TLS.Cert, cfg.TLS.Key)
	if err != nil {
		return nil, fmt.Errorf("tls: load certificate %s and key %s: %w", cfg.TLS.Cert, cfg.TLS.Key, err)
	}
	ln := opt.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
		}
	}
	d.ln = tls.NewListener(ln, server.TLSConfig(cert))
	s := &server.Server{Archive: d.Archive, Cat: cat, Log: log, MaxSize: cfg.MaxVconSize, Metrics: d.Metrics, Limits: opt.Limits,
		Disk: d.Disk, Degraded: d.degraded, Webhooks: webhookRules(cfg)}
	if d.Replica != nil {
		s.Replica = d.Replica
	}
	d.srv = server.NewHTTPServer(s.Handler(), log)
	opt.Limits.Apply(d.srv)

	runCtx, stop := context.WithCancel(context.Background())
	d.stop = stop
	if d.Replica != nil {
		d.wg.Add(2)
		go func() {
			defer d.wg.Done()
			d.Replica.Run(runCtx)
		}()
		go func() {
			defer d.wg.Done()
			d.every(runCtx, time.Second, replicaMetrics(reg, d.Replica))
		}()
	}
	d.wg.Add(5)
	go func() {
		defer d.wg.Done()
		d.every(runCtx, 2*time.Second, d.IndexSearch)
	}()
	go func() {
		defer d.wg.Done()
		(&webhook.Sender{Cat: cat, Key: mk, Log: log, Metrics: webhook.NewMetrics(reg), Policy: opt.Webhooks, Rules: webhookRules(cfg)}).Run(runCtx)
	}()
	go func() {
		defer d.wg.Done()
		d.every(runCtx, diskInterval, func(context.Context) { d.Disk.Tick() })
	}()
	go func() {
		defer d.wg.Done()
		if err := d.srv.Serve(d.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("serve stopped", "error", err.Error())
		}
	}()
	go func() {
		defer d.wg.Done()
		d.every(runCtx, cfg.Retention.PurgeInterval, d.Sweep)
	}()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		// The look at every object, once the server answers, then daily
		// (docs/check-and-recovery.md). With Parquet storage the pack runs
		// start after the first look, which removed the objects of versions
		// an earlier run packed: a pack run at start, then every
		// pack_interval (docs/parquet-storage.md).
		d.Look(runCtx)
		if d.Archive.Packer() != nil && runCtx.Err() == nil {
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				d.PackRun(runCtx)
				d.every(runCtx, cfg.Storage.Parquet.PackInterval, d.PackRun)
			}()
		}
		d.every(runCtx, lookInterval, d.Look)
	}()
	log.Info("listening", "address", d.ln.Addr().String(), "storage", d.Archive.Objects.String())
	ok = true
	return d, nil
}

// every runs fn now and then every interval until ctx ends.
func (d *Daemon) every(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn(ctx)
		}
	}
}

// lookInterval is how often the look at every object runs after the one
// at start.
const lookInterval = 24 * time.Hour

// Look runs the look at every object (archive.Archive.Look) and logs its
// counts, never a tenant or a key. A pass cut by a stop goes on at the
// next start.
func (d *Daemon) Look(ctx context.Context) {
	d.lookMu.Lock()
	defer d.lookMu.Unlock()
	st, err := d.Archive.Look(ctx, d.started)
	if err != nil && ctx.Err() == nil {
		d.Log.Error("storage look failed", "objects", st.Objects, "error", err.Error())
	}
	d.Archive.LogLook(st)
}

// Sweep runs one purge sweep and logs its counts.
func (d *Daemon) Sweep(ctx context.Context) {
	d.sweepMu.Lock()
	defer d.sweepMu.Unlock()
	n, err := d.Archive.Sweep(ctx)
	if ctx.Err() == nil {
		d.Metrics.Swept(err)
	}
	if err != nil && ctx.Err() == nil {
		d.Log.Error("purge sweep failed", "purged", n, "error", err.Error())
	} else if n > 0 {
		d.Log.Info("purge sweep", "purged", n)
	}
}

// PackRun runs one pack run and logs its counts, never a tenant
// (docs/parquet-storage.md: "pack run files=<n> versions=<n> failed=<n>").
func (d *Daemon) PackRun(ctx context.Context) {
	p := d.Archive.Packer()
	if p == nil || !d.roomFor("pack run") {
		return
	}
	d.packMu.Lock()
	defer d.packMu.Unlock()
	st := p.Run(ctx)
	d.Log.Info("pack run", "files", st.Files, "versions", st.Versions, "failed", st.Failed)
	outcome := server.PackOK
	switch {
	case st.Stopped:
		outcome = server.PackAbandoned
	case st.Failed > 0:
		outcome = server.PackFailed
	}
	d.Metrics.PackRun(outcome, st.Files, st.Versions)
}

// IndexSearch builds the search indexes that are not built yet, a batch
// at a time, until none is left or the server stops.
func (d *Daemon) IndexSearch(ctx context.Context) {
	for ctx.Err() == nil && d.roomFor("search indexing") {
		n, err := d.Archive.IndexBacklog(ctx, 500)
		if err != nil {
			if ctx.Err() == nil {
				d.Log.Error("search indexing failed", "error", err.Error())
			}
			return
		}
		if n == 0 {
			return
		}
		d.Metrics.Indexed(n)
		d.Log.Debug("search indexing", "versions", n)
	}
}

// Addr is the address the server listens on.
func (d *Daemon) Addr() string { return d.ln.Addr().String() }

// Close stops accepting, lets requests in flight finish (until ctx ends),
// stops the sweeps, and releases the catalog and the lock.
func (d *Daemon) Close(ctx context.Context) error {
	err := d.srv.Shutdown(ctx)
	d.stop()
	d.wg.Wait()
	if d.Replica != nil {
		// What the last requests changed (their audit records) goes out
		// before the catalog closes, not at the next start.
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if serr := d.Replica.Drain(sctx); serr != nil {
			d.Log.Error("replica: the last changes stay for the next start", "error", serr.Error())
		}
		cancel()
	}
	d.release()
	return err
}

func (d *Daemon) release() {
	if d.Cat != nil {
		d.Cat.Close()
		d.Cat = nil
	}
	if d.unlock != nil {
		d.unlock()
		d.unlock = nil
	}
}

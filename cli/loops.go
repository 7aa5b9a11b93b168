package cli

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/config"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/reserve"
	"github.com/vcon-server/vcon-server/server"
	"github.com/vcon-server/vcon-server/webhook"
)

// loopGroup runs the daemon's loops, each in a goroutine of its own, and
// owns their wait: starting a loop is a call to Go, never a count to
// keep.
type loopGroup struct {
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// newLoopGroup makes a group whose loops run until Stop. Their context is
// not start-up's, so that the end of Start's ctx stops none of them.
func newLoopGroup() *loopGroup {
	ctx, stop := context.WithCancel(context.Background())
	return &loopGroup{ctx: ctx, stop: stop}
}

// Go runs fn in a goroutine of its own; fn returns once its context ends.
// The goroutine carries the profiler label loop=name (runtime/pprof), so
// a CPU profile of serve tells each loop's share from the requests'.
func (g *loopGroup) Go(name string, fn func(context.Context)) {
	g.wg.Go(func() { pprof.Do(g.ctx, pprof.Labels("loop", name), fn) })
}

// Stop ends the loops' context and waits until every loop has returned.
func (g *loopGroup) Stop() {
	g.stop()
	g.wg.Wait()
}

// runLoops starts answering and the background loops; Close stops them.
func (d *Daemon) runLoops(cfg *config.Config, opt Options) {
	g := newLoopGroup()
	d.loops = g
	g.Go("https", func(context.Context) {
		if err := d.srv.Serve(d.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.Log.Error("serve stopped", "error", err.Error())
		}
	})
	if d.Replica != nil {
		g.Go("replica", d.Replica.Run)
		tick := replicaMetrics(d.reg, d.Replica)
		g.Go("replica metrics", func(ctx context.Context) { every(ctx, time.Second, tick) })
	}
	g.Go("audit log checkpoints", d.signLogs)
	g.Go("search indexing", func(ctx context.Context) { every(ctx, 2*time.Second, d.IndexSearch) })
	g.Go("master key", func(ctx context.Context) {
		every(ctx, time.Second, func(ctx context.Context) { d.watchMasterKey(ctx, cfg) })
	})
	if d.copies != nil {
		g.Go("audit log copies", func(ctx context.Context) { d.copyLogs(ctx, cfg.AuditLog.CopyInterval) })
	}
	sender := &webhook.Sender{Cat: d.Cat, Key: d.key, Log: d.Log, Metrics: webhook.NewMetrics(d.reg), Policy: opt.Webhooks, Rules: webhookRules(cfg),
		Checkpoint: func(ctx context.Context, tenant ids.ID, size uint64) (string, []byte, error) {
			return d.Logs.CheckpointAt(ctx, catalog.LogID(tenant), size)
		}}
	g.Go("webhooks", sender.Run)
	g.Go("free space", func(ctx context.Context) { every(ctx, diskInterval, d.diskTick) })
	g.Go("purge sweep", func(ctx context.Context) { every(ctx, cfg.Retention.PurgeInterval, d.Sweep) })

	// The look at every object, once the server answers, then daily
	// (docs/check-and-recovery.md).
	looked := make(chan struct{}) // closed when the first look returns
	g.Go("look", func(ctx context.Context) {
		d.Look(ctx)
		close(looked)
		every(ctx, lookInterval, d.Look)
	})
	if d.Archive.Packer() == nil {
		return
	}
	// With Parquet storage, a pack run at start, then every pack_interval
	// (docs/parquet-storage.md). The first one waits for the first look:
	// the look removes the objects of versions an earlier run packed and
	// a crash kept from its deletes, "before the first pack run"
	// (docs/FORMAT.md, "Pack run", its recovery).
	g.Go("pack runs", func(ctx context.Context) {
		<-looked
		if ctx.Err() != nil {
			return
		}
		d.PackRun(ctx)
		every(ctx, cfg.Storage.Parquet.PackInterval, d.PackRun)
	})
}

// diskTick measures the disk and makes the reserve again when it can
// (diskspace.Monitor.Tick). While the reserve is missing, the catalog's
// write-ahead log is copied into the catalog and truncated first: the
// log keeps a page per page each commit changed (a record, its leaf),
// up to SQLite's 1000-page checkpoint, 4 MiB a full disk may need for
// the reserve.
func (d *Daemon) diskTick(ctx context.Context) {
	if !reserve.Whole(filepath.Dir(d.Cat.Path())) {
		// Bounded: a reader holding the log waits for the next tick.
		cctx, cancel := context.WithTimeout(ctx, diskInterval/2)
		if err := d.Cat.Checkpoint(cctx); err != nil && ctx.Err() == nil {
			d.Log.Debug("catalog checkpoint for the reserve", "error", err.Error())
		}
		cancel()
	}
	d.Disk.Tick()
}

// every runs fn every interval until ctx ends; a loop that must run at
// once calls fn itself first.
func every(ctx context.Context, interval time.Duration, fn func(context.Context)) {
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
	if n > 0 {
		d.Logs.Poke() // the purges' records signed at once
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

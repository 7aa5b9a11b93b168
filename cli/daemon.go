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
	"github.com/vcon-server/vcon-server/export"
	"github.com/vcon-server/vcon-server/internal/auditlog"
	"github.com/vcon-server/vcon-server/internal/config"
	"github.com/vcon-server/vcon-server/internal/diskspace"
	"github.com/vcon-server/vcon-server/internal/metrics"
	"github.com/vcon-server/vcon-server/internal/reserve"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/replica"
	"github.com/vcon-server/vcon-server/seal"
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
	// Logs signs and serves the audit logs (docs/audit-log.md).
	Logs *auditlog.Logs
	// copies writes the logs' checkpoints and tiles to the buckets; nil
	// without one.
	copies *auditlog.Copier

	key     *seal.MasterKey
	keyMiss string            // the rotated key's file this server could not open, logged once
	reg     *metrics.Registry // what Metrics and the loops count into
	unlock  func()
	ln      net.Listener
	srv     *http.Server
	loops   *loopGroup
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

// now is the clock of retention.
func (o Options) now() func() time.Time {
	if o.Now != nil {
		return o.Now
	}
	return time.Now
}

// Start opens everything serve needs, repairs what a crash left, and
// starts answering, in that order: each phase needs what the one before
// it made. Every refusal says what is wrong and what to do.
func Start(ctx context.Context, cfg *config.Config, log *slog.Logger, opt Options) (*Daemon, error) {
	d := &Daemon{Log: log}
	ok := false
	defer func() {
		if !ok {
			d.release()
		}
	}()
	if err := d.open(ctx, cfg, opt); err != nil {
		return nil, err
	}
	if err := d.repair(ctx); err != nil {
		return nil, err
	}
	if err := d.openLogs(ctx, cfg); err != nil {
		return nil, err
	}
	if err := d.listen(cfg, opt); err != nil {
		return nil, err
	}
	d.runLoops(cfg, opt)
	log.Info("listening", "address", d.ln.Addr().String(), "storage", d.Archive.Objects.String())
	ok = true
	return d, nil
}

// open takes the data directory's lock, clears what a crash left that
// only takes room, and opens the catalog, its replica and the archive.
func (d *Daemon) open(ctx context.Context, cfg *config.Config, opt Options) error {
	if err := cfg.CheckFiles(true); err != nil {
		return err
	}
	unlock, err := catalog.Lock(cfg.DataDir)
	if errors.Is(err, catalog.ErrLocked) {
		return fmt.Errorf("another vcon-server serve is running on the data directory %s; stop it first", cfg.DataDir)
	}
	if err != nil {
		return err
	}
	d.unlock = unlock
	if err := removeLeftovers(cfg.DataDir, d.Log); err != nil {
		return err
	}
	if d.key, d.Cat, err = openKeyed(ctx, cfg); err != nil {
		return err
	}
	d.Cat.Now = opt.now()
	if err := d.openCatalogReplica(ctx, cfg); err != nil {
		return err
	}
	d.reg = metrics.NewRegistry()
	d.Metrics = server.NewMetrics(d.reg)
	d.reg.NewGaugeFunc("vcon_tenant_keys_failing", "Tenants whose own KMS key refused or could not be reached at the last try (tenant show names the key).",
		func() float64 { return float64(d.Archive.TenantKeysFailing()) })
	d.Disk = newDiskMonitor(cfg, d.Log, d.reg)
	d.Archive, err = openArchive(ctx, cfg, d.key, d.Cat, parts{
		serve: true, log: d.Log, now: d.Cat.Now, purged: d.Metrics.Purged,
		// Every object-store call from here on, recovery's included, is
		// counted by call and outcome.
		wrap:    func(s objstore.Store) objstore.Store { return spareStore(cfg, objstore.NewMetered(s, d.reg)) },
		replica: d.Replica,
	})
	return err
}

// removeLeftovers removes what a crash left that only takes room. It
// runs before the catalog opens: on a full disk its blocks are the room
// the catalog needs to open (its shared-memory file) and to commit.
func removeLeftovers(dataDir string, log *slog.Logger) error {
	if n, err := objstore.RemoveStaleSpool(dataDir, time.Hour); err != nil {
		return err
	} else if n > 0 {
		log.Info("start-up recovery removed spool files a crash left", "removed", n)
	}
	if n := removeRestoreScratch(dataDir); n > 0 {
		log.Info("start-up recovery removed the partial catalog of a killed restore", "removed", n)
	}
	// A killed export's scratch folder goes now, not at the next export:
	// it may hold the live ids of its tenant.
	if n := export.RemoveStaleScratch(objstore.SpoolDir(dataDir)); n > 0 {
		log.Info("start-up recovery removed the scratch folders of killed exports", "removed", n)
	}
	return nil
}

// openCatalogReplica opens and vets the catalog's replica, or, without
// [replica], warns and stops the catalog's change log.
func (d *Daemon) openCatalogReplica(ctx context.Context, cfg *config.Config) error {
	var err error
	if d.Replica, err = openReplica(ctx, cfg, d.key, d.Cat, d.Log, true); err != nil {
		return err
	}
	if d.Replica != nil {
		return d.Replica.Vet(ctx)
	}
	d.Log.Warn(msgNoReplica)
	// On a full disk this waits for the next start: the change log it
	// clears only takes room, and serve must start there to free it.
	if err := d.Cat.DisableChangeLog(ctx); reserve.IsFull(err) {
		d.Log.Warn("start-up: the data directory's disk is full; the catalog's change log is cleared at a later start", "error", err.Error())
	} else if err != nil {
		return err
	}
	return nil
}

// repair makes what an older catalog lacks and finishes what a crash cut
// off (archive.Archive.Recover), before the server answers.
func (d *Daemon) repair(ctx context.Context) error {
	if err := d.moveToTenantKeys(ctx); err != nil {
		return err
	}
	// A catalog made before erasures has no receipt signing key yet.
	if made, err := archive.EnsureSigningKey(ctx, d.Cat, d.key); err != nil {
		return err
	} else if made {
		d.Log.Info("made the signing key of erasure receipts")
	}
	// Every version id made from here on is of this process: only older
	// objects can be orphans (the look at every object, runLoops).
	d.started = d.Cat.Now()
	rec, err := d.Archive.Recover(ctx)
	if err != nil {
		return fmt.Errorf("start-up recovery: %w", err)
	}
	if rec != (archive.Recovery{}) {
		d.Log.Info("start-up recovery",
			"keys_destroyed_again", rec.Tombstoned, "purges_finished", rec.PurgesEnded,
			"pack_files_removed", rec.PackFiles,
			"pack_files_adopted", rec.Adopted, "versions_repointed", rec.Repointed)
	}
	return nil
}

// moveToTenantKeys moves a catalog made before tenant keys under them
// (docs/FORMAT.md, "Keys"), logging its progress every 5 seconds: once
// per catalog, resumed where a cut stopped it.
func (d *Daemon) moveToTenantKeys(ctx context.Context) error {
	if done, err := d.Cat.KeysMoved(ctx); err != nil || done {
		return err
	}
	total, err := d.Cat.CountWrappedKeys(ctx)
	if err != nil {
		return err
	}
	d.Log.Info("start-up: moving the data keys under a key per tenant; search indexes are built again afterwards", "keys", total)
	moved, last := 0, time.Now()
	n, err := archive.MoveToTenantKeys(ctx, d.Cat, d.key, func(k int) {
		moved += k
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			d.Log.Info("start-up: moving the data keys under a key per tenant", "moved", moved, "keys", total)
		}
	})
	if err != nil {
		return fmt.Errorf("start-up: the move of the data keys under a key per tenant stopped after %d key(s), and resumes at the next start: %w", moved, err)
	}
	d.Log.Info("start-up: the data keys are under a key per tenant", "moved", n)
	return nil
}

// listen loads the certificate, listens, and makes the HTTPS server; it
// answers once runLoops starts it.
func (d *Daemon) listen(cfg *config.Config, opt Options) error {
	cert, err := tls.LoadX509KeyPair(cfg.TLS.Cert, cfg.TLS.Key)
	if err != nil {
		return fmt.Errorf("tls: load certificate %s and key %s: %w", cfg.TLS.Cert, cfg.TLS.Key, err)
	}
	ln := opt.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
		}
	}
	d.ln = tls.NewListener(ln, server.TLSConfig(cert))
	s := &server.Server{Archive: d.Archive, Cat: d.Cat, Log: d.Log, MaxSize: cfg.MaxVconSize, Metrics: d.Metrics, Limits: opt.Limits,
		Disk: d.Disk, Degraded: d.degraded, Webhooks: webhookRules(cfg), LawfulSkew: cfg.LawfulBasis.Skew,
		MCP: server.MCPSettings{Enabled: cfg.MCP.Enabled, Rate: cfg.MCP.Rate, CallTimeout: cfg.MCP.CallTimeout, MaxResult: cfg.MCP.MaxResult}}
	if d.Replica != nil {
		s.Replica = d.Replica
	}
	s.Logs = d.Logs
	d.srv = server.NewHTTPServer(s.Handler(), d.Log)
	d.srv.RegisterOnShutdown(s.CloseStreams) // an MCP session's stream does not hold the stop
	opt.Limits.Apply(d.srv)
	return nil
}

// Addr is the address the server listens on.
func (d *Daemon) Addr() string { return d.ln.Addr().String() }

// Close stops accepting, lets requests in flight finish (until ctx ends),
// stops the loops, and releases the catalog and the lock.
func (d *Daemon) Close(ctx context.Context) error {
	err := d.srv.Shutdown(ctx)
	d.loops.Stop()
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

package cli

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/internal/config"
	"github.com/vcon-server/vcon-server/internal/diskspace"
	"github.com/vcon-server/vcon-server/internal/metrics"
	"github.com/vcon-server/vcon-server/objstore"
)

// diskInterval is how often serve looks at the data directory's free
// space and makes the reserve again once there is room; a store looks
// too, at most once a second (diskspace.Monitor.Low).
const diskInterval = 2 * time.Second

// newDiskMonitor watches the data directory's file system against
// min_free and makes the reserve if there is room for it.
func newDiskMonitor(cfg *config.Config, log *slog.Logger, reg *metrics.Registry) *diskspace.Monitor {
	m := diskspace.New(diskspace.Options{
		Dir: cfg.DataDir, MinBytes: cfg.MinFree.Bytes, MinPercent: cfg.MinFree.Percent,
		Log: log, Registry: reg,
	})
	m.Tick()
	return m
}

// spareStore lets a purge's small writes take the reserve
// (diskspace.Spare), so that a purge on a full disk reaches its deletes.
func spareStore(cfg *config.Config, s objstore.Store) objstore.Store {
	return diskspace.Spare(s, cfg.DataDir, archive.PurgeWrite)
}

// roomFor reports whether background work that grows the data directory
// (a pack run's local copies, search tokens in the catalog) may run: not
// while the disk is below min_free, where it would take the room that
// stores are refused to keep, and at last the reserve, which is for the
// writes that free space (internal/reserve).
func (d *Daemon) roomFor(what string) bool {
	if !d.Disk.Low() {
		return true
	}
	// The crossing's WARN said so once; this runs every few seconds.
	d.Log.Debug("paused while the disk is below min_free", "work", what)
	return false
}

// degraded is what GET /health reports: the states an operator must act
// on now.
func (d *Daemon) degraded() []string {
	reasons := d.Disk.Reasons()
	if !d.probe.reachable(d.Archive.Objects, d.Log) {
		reasons = append(reasons, reasonUnreachable)
	}
	if r := d.Replica; r != nil && r.Lag() > max(r.MaxLag(), replicaGrace) {
		reasons = append(reasons, reasonReplicaBehind)
	}
	return reasons
}

const (
	reasonUnreachable   = "the object store cannot be reached"
	reasonReplicaBehind = "the catalog's replica is behind more than max_lag"
)

// replicaGrace is the lag /health tolerates with max_lag 0, whose changes
// wait for the replica one by one: as long as a write waits for it before
// it is refused (docs/disaster-recovery.md).
const replicaGrace = 5 * time.Second

// probeEvery is how often /health asks the object store whether it
// answers: a load balancer's polls cost one request per interval, not one
// each.
const probeEvery = 10 * time.Second

// storeProbe is whether the object store answered its last probe: a stat
// of the bucket's marker (a missing object is an answer too).
type storeProbe struct {
	mu    sync.Mutex
	at    time.Time
	down  bool
	known bool
}

func (p *storeProbe) reachable(s objstore.Store, log *slog.Logger) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.known && time.Since(p.at) < probeEvery {
		return !p.down
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := s.Stat(ctx, archive.MarkerKey)
	down := err != nil && !errors.Is(err, objstore.ErrNotFound)
	if down != p.down || !p.known && down {
		if down {
			log.Warn("object store cannot be reached: /health is degraded", "error", err.Error())
		} else {
			log.Warn("object store answers again")
		}
	}
	p.at, p.down, p.known = time.Now(), down, true
	return !down
}

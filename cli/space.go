package cli

import (
	"log/slog"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/config"
	"github.com/vcon-server/vcon-server/diskspace"
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

// degraded is what GET /health reports: the states an operator must act
// on now.
func (d *Daemon) degraded() []string {
	return d.Disk.Reasons()
}

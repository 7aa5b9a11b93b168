// Package diskspace watches the free space of the data directory's file
// system against min_free (docs/configuration.md): below it serve refuses
// stores with 507, /health answers degraded, and /metrics shows the free
// bytes and the line. It also keeps the reserve of internal/reserve made
// while there is room, and gives it back for the small writes of a purge
// (Spare). docs/troubleshooting.md, "The disk is low", is the operator's
// side of it.
package diskspace

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vcon-server/vcon-server/internal/metrics"
	"github.com/vcon-server/vcon-server/internal/reserve"
)

// ReasonLow is the /health reason while the disk is below the line.
const ReasonLow = "the data directory's disk has less free space than min_free"

// ReasonUnknown is the /health reason while free space cannot be read.
const ReasonUnknown = "the free space of the data directory's disk cannot be read"

// ReasonNoReserve is the /health reason while the reserve is missing and
// the disk has no room to make it (internal/reserve): stores are refused
// meanwhile, since a disk that filled without it could refuse the
// commits that free space.
const ReasonNoReserve = "the data directory's disk has no room for its reserve (space.reserve), the room to delete with when it is full"

// ReasonFull is the /health reason while the disk has less free space
// than its reserve's size, whatever min_free says: a store there would
// take the last room the catalog needs to commit a delete.
const ReasonFull = "the data directory's disk is full: less free space than its reserve's size (space.reserve)"

// Options say what a Monitor watches.
type Options struct {
	Dir        string  // the data directory
	MinBytes   int64   // the line in bytes, when MinPercent is 0
	MinPercent float64 // the line as a percentage of the file system's size
	Log        *slog.Logger
	Registry   *metrics.Registry
	Now        func() time.Time // time.Now when nil
}

// Monitor is the free space of the data directory's file system against
// the line. It is safe for concurrent use.
type Monitor struct {
	opt Options

	low       atomic.Bool
	unknown   atomic.Bool
	noReserve atomic.Bool  // the reserve is missing and there is no room to make it
	full      atomic.Bool  // less free than the reserve's size (ReasonFull)
	checked   atomic.Int64 // unix nanos of the last measure

	mu     sync.Mutex // one measure at a time; guards wasLow
	wasLow bool

	resMu    sync.Mutex // one Tick's reserve upkeep at a time; guards what follows
	made     bool       // the reserve was made or seen whole since the start
	released bool       // the reserve was seen released and not made again
	warned   bool       // the reserve could not be made, and the log said so

	free, line, held *metrics.Gauge
	lowGauge         *metrics.Gauge
	refused          *metrics.Counter
}

// maxAge is how old a measure Low may answer from: a store checks the line
// at most this often, however many arrive. A statfs costs microseconds;
// at a thousand stores a second of 32 KiB, 100 ms lets about 3 MiB pass
// the line.
const maxAge = 100 * time.Millisecond

// New makes a Monitor and measures once.
func New(opt Options) *Monitor {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	r := opt.Registry
	m := &Monitor{
		opt:      opt,
		free:     r.NewGauge("vcon_disk_free_bytes", "Bytes free on the data directory's file system."),
		line:     r.NewGauge("vcon_disk_min_free_bytes", "min_free in bytes: below it stores are refused with 507."),
		held:     r.NewGauge("vcon_disk_reserve_bytes", "Bytes the reserve holds for the catalog and purges; 0 while released."),
		lowGauge: r.NewGauge("vcon_disk_low", "1 while the data directory's disk is below min_free."),
		refused:  r.NewCounter("vcon_disk_low_refusals_total", "Stores and replacements refused with 507 because the disk is below min_free or full."),
	}
	m.measure()
	return m
}

// Low reports whether stores must be refused, from a measure at most
// maxAge old: the disk is below the line, the reserve is missing and
// the disk has no room to make it again (stores would take the room it
// is made from), or the disk is full (ReasonFull).
func (m *Monitor) Low() bool {
	if m.opt.Now().UnixNano()-m.checked.Load() > int64(maxAge) {
		m.measure()
	}
	return m.low.Load() || m.noReserve.Load() || m.full.Load()
}

// Refused counts a store refused for space.
func (m *Monitor) Refused() { m.refused.Inc() }

// Reasons are the /health reasons of the disk: none while above the line.
func (m *Monitor) Reasons() []string {
	m.Low()
	if m.unknown.Load() {
		return []string{ReasonUnknown}
	}
	var reasons []string
	if m.low.Load() {
		reasons = append(reasons, ReasonLow)
	}
	if m.noReserve.Load() {
		reasons = append(reasons, ReasonNoReserve)
	}
	if len(reasons) == 0 && m.full.Load() {
		reasons = append(reasons, ReasonFull)
	}
	return reasons
}

// Tick measures and keeps the reserve: made again once the file system has
// room for it (serve calls it every few seconds).
func (m *Monitor) Tick() {
	m.measure()
	// Not m.mu: making the reserve syncs 16 MiB, which stores that need a
	// new measure must not wait for.
	m.resMu.Lock()
	defer m.resMu.Unlock()
	held, whole := reserve.Held(m.opt.Dir), reserve.Whole(m.opt.Dir)
	if whole {
		m.made = true
	}
	if !whole && m.made && !m.released {
		m.released = true
		m.opt.Log.Warn("disk reserve released: a write failed for want of space and took the reserve; it is made again once the disk has room", "reserve", held)
	}
	made, err := reserve.Make(m.opt.Dir)
	switch {
	case errors.Is(err, reserve.ErrNoRoom):
		// Once, and not after a release, whose line said it already.
		if !m.made && !m.warned {
			m.warned = true
			size, _ := reserve.Size(m.opt.Dir)
			m.opt.Log.Warn("disk reserve cannot be made: the disk has no room for it twice over; stores are refused with 507 until it has, since a full disk without it could refuse the deletes that free space", "reserve", size)
		}
	case err != nil:
		m.opt.Log.Error("disk reserve cannot be made", "error", err.Error())
	}
	if made {
		m.made, m.released, m.warned = true, false, false
		m.opt.Log.Info("disk reserve made", "reserve", reserve.Held(m.opt.Dir))
	}
	m.held.Set(float64(reserve.Held(m.opt.Dir)))
	m.measure() // the reserve made, or not, is part of Low
}

// lineOf is the line in bytes on a file system of total bytes.
func (m *Monitor) lineOf(total uint64) uint64 {
	if m.opt.MinPercent > 0 {
		return uint64(float64(total) * m.opt.MinPercent / 100)
	}
	return uint64(m.opt.MinBytes)
}

// margin is how far above the line free space must come back before
// stores resume: a disk hovering at the line neither flaps nor logs a
// crossing per store.
func margin(line uint64) uint64 { return line / 32 }

func (m *Monitor) measure() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.checked.Store(m.opt.Now().UnixNano())
	free, total, err := reserve.Statfs(m.opt.Dir)
	if err != nil {
		if !m.unknown.Swap(true) {
			m.opt.Log.Error("disk free space cannot be read", "error", err.Error())
		}
		return
	}
	m.unknown.Store(false)
	// A reserve made needs room for it twice over (reserve.Make).
	size := uint64(reserve.SizeFor(total))
	m.noReserve.Store(!reserve.Whole(m.opt.Dir) && free < 2*size)
	m.full.Store(free < size)
	line := m.lineOf(total)
	low := free < line
	if m.wasLow && !low && free < line+margin(line) {
		low = true
	}
	m.free.Set(float64(free))
	m.line.Set(float64(line))
	if low {
		m.lowGauge.Set(1)
	} else {
		m.lowGauge.Set(0)
	}
	m.low.Store(low)
	if low != m.wasLow {
		m.wasLow = low
		if low {
			m.opt.Log.Warn("disk below min_free: stores are refused with 507 until space is freed; reads, deletes and purges go on", "free", free, "min_free", line)
		} else {
			m.opt.Log.Warn("disk above min_free again: stores are accepted", "free", free, "min_free", line)
		}
	}
}

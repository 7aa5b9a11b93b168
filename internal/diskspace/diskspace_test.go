package diskspace

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/logline"
	"github.com/vcon-server/vcon-server/internal/metrics"
	"github.com/vcon-server/vcon-server/internal/reserve"
)

// fakeDisk sets reserve.Statfs for a test: free bytes of a total.
type fakeDisk struct {
	mu          sync.Mutex
	free, total uint64
}

func (d *fakeDisk) set(free uint64) { d.mu.Lock(); d.free = free; d.mu.Unlock() }

func newFakeDisk(t *testing.T, free, total uint64) *fakeDisk {
	d := &fakeDisk{free: free, total: total}
	old := reserve.Statfs
	t.Cleanup(func() { reserve.Statfs = old })
	reserve.Statfs = func(string) (uint64, uint64, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.free, d.total, nil
	}
	return d
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestLine(t *testing.T) {
	disk := newFakeDisk(t, 100<<20, 1<<30)
	clk := &clock{t: time.Unix(1e9, 0)}
	var log bytes.Buffer
	reg := metrics.NewRegistry()
	m := New(Options{Dir: t.TempDir(), MinBytes: 64 << 20, Log: logline.New(&log, "info", "serve"), Registry: reg, Now: clk.now})
	if m.Low() || m.Reasons() != nil {
		t.Fatal("low with 100 MiB free over a 64 MiB line")
	}
	disk.set(63 << 20)
	if m.Low() {
		t.Fatal("a measure younger than maxAge was taken again")
	}
	clk.advance(maxAge + time.Millisecond)
	if !m.Low() {
		t.Fatal("not low with 63 MiB free")
	}
	if r := m.Reasons(); len(r) != 1 || r[0] != ReasonLow {
		t.Fatalf("reasons %q", r)
	}
	// Back over the line, but within the margin: still low.
	disk.set(65 << 20)
	clk.advance(maxAge + time.Millisecond)
	if !m.Low() {
		t.Fatal("a disk 1 MiB over the line left the low state: it would flap")
	}
	disk.set(67 << 20)
	clk.advance(maxAge + time.Millisecond)
	if m.Low() {
		t.Fatal("still low with 67 MiB free")
	}
	var b bytes.Buffer
	reg.Write(&b)
	for _, want := range []string{"vcon_disk_free_bytes 7.0254592e+07", "vcon_disk_min_free_bytes 6.7108864e+07", "vcon_disk_low 0"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, b.String())
		}
	}
	warns := strings.Count(log.String(), "WARN")
	if warns != 2 || !strings.Contains(log.String(), "disk below min_free") || !strings.Contains(log.String(), "disk above min_free again") {
		t.Fatalf("want one WARN each way, got:\n%s", log.String())
	}
}

func TestPercent(t *testing.T) {
	newFakeDisk(t, 40<<20, 1<<30)
	m := New(Options{Dir: t.TempDir(), MinPercent: 5, Log: logline.Discard(), Registry: metrics.NewRegistry()})
	if !m.Low() {
		t.Fatal("40 MiB free of 1 GiB is below 5%")
	}
	newFakeDisk(t, 60<<20, 1<<30)
	m = New(Options{Dir: t.TempDir(), MinPercent: 5, Log: logline.Discard(), Registry: metrics.NewRegistry()})
	if m.Low() {
		t.Fatal("60 MiB free of 1 GiB is above 5%")
	}
}

// Tick makes the reserve when there is room, says once when it was
// released, and makes it again once there is room; meanwhile stores are
// refused and /health says why.
func TestTickKeepsTheReserve(t *testing.T) {
	dir := t.TempDir()
	disk := newFakeDisk(t, 1<<30, 2<<30)
	var log bytes.Buffer
	m := New(Options{Dir: dir, MinBytes: 1 << 20, Log: logline.New(&log, "info", "serve"), Registry: metrics.NewRegistry()})
	m.Tick()
	if reserve.Held(dir) < reserve.MaxSize || m.Low() || m.Reasons() != nil {
		t.Fatalf("after a tick with room: the reserve holds %d, low %v, reasons %q", reserve.Held(dir), m.Low(), m.Reasons())
	}
	reserve.Release(dir)
	disk.set(reserve.MaxSize) // above the line, without room to make it again
	m.Tick()
	m.Tick()
	if reserve.Held(dir) != 0 {
		t.Fatal("the reserve was made again without room")
	}
	if r := m.Reasons(); !m.Low() || len(r) != 1 || r[0] != ReasonNoReserve {
		t.Fatalf("released without room to make it again: low %v, reasons %q", m.Low(), r)
	}
	disk.set(1 << 30)
	m.Tick()
	if reserve.Held(dir) < reserve.MaxSize || m.Low() || m.Reasons() != nil {
		t.Fatalf("with room again: the reserve holds %d, low %v, reasons %q", reserve.Held(dir), m.Low(), m.Reasons())
	}
	if n := strings.Count(log.String(), "disk reserve released"); n != 1 || strings.Contains(log.String(), "cannot be made") {
		t.Fatalf("%d lines about the release, want 1 and none about making it:\n%s", n, log.String())
	}
}

// A disk that never had room for the reserve says so once, in the log
// and on /health, and refuses stores until it has: a 16 MiB file system
// gets a reserve of 816 KiB once 1.6 MiB are free.
func TestNoRoomForTheReserve(t *testing.T) {
	dir := t.TempDir()
	size := uint64(reserve.SizeFor(16 << 20))
	disk := newFakeDisk(t, 2*size-1, 16<<20)
	var log bytes.Buffer
	m := New(Options{Dir: dir, MinBytes: 1 << 10, Log: logline.New(&log, "info", "serve"), Registry: metrics.NewRegistry()})
	m.Tick()
	m.Tick()
	if r := m.Reasons(); reserve.Held(dir) != 0 || !m.Low() || len(r) != 1 || r[0] != ReasonNoReserve {
		t.Fatalf("without room: the reserve holds %d, low %v, reasons %q", reserve.Held(dir), m.Low(), r)
	}
	if n := strings.Count(log.String(), "WARN vcon_server::serve: disk reserve cannot be made"); n != 1 {
		t.Fatalf("%d WARN lines about the reserve, want 1:\n%s", n, log.String())
	}
	disk.set(2 * size)
	m.Tick()
	if h := reserve.Held(dir); h < int64(size) || m.Low() || m.Reasons() != nil {
		t.Fatalf("with room: the reserve holds %d, low %v, reasons %q", h, m.Low(), m.Reasons())
	}
	if !strings.Contains(log.String(), "disk reserve made reserve=835584") {
		t.Fatalf("no line about the reserve made:\n%s", log.String())
	}
}

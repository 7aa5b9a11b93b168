package logline

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(strings.TrimSuffix(s.b.String(), "\n"), "\n")
}

// A storm of one error is its first line, then one line at the window's
// end with the count; another error, and every info line, pass through.
// After the window, the error is logged whole again.
func TestStorm(t *testing.T) {
	var buf syncBuf
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	inner := &handler{w: &buf, mu: &sync.Mutex{}, level: slog.LevelInfo, component: "serve"}
	log := slog.New(newStorm(inner, time.Hour, clock)) // the timer never fires here
	var first, last string
	for i := 0; i < 2450; i++ {
		// The path differs each time by its digits and ids only.
		last = ids.NewRandom().String()
		if i == 0 {
			first = last
		}
		log.Error("request failed", "route", "POST /vcons", "error", "open /data/objects/"+strings.Repeat("7", i%5+1)+"/"+last+": no space left on device")
		log.Info("pack run", "files", 1)
	}
	log.Error("audit record failed", "error", "database or disk is full (13)")
	advance(time.Hour)
	log.Error("request failed", "route", "POST /vcons", "error", "open /data/objects/1: no space left on device")
	got := buf.lines()
	var errs []string
	for _, l := range got {
		if !strings.Contains(l, "pack run") {
			errs = append(errs, l[len("2026-11-30T12:00:00Z "):])
		}
	}
	want := []string{
		`ERROR vcon_server::serve: request failed route="POST /vcons" error="open /data/objects/7/` + first + `: no space left on device"`,
		`ERROR vcon_server::serve: audit record failed error="database or disk is full (13)"`,
		`ERROR vcon_server::serve: request failed route="POST /vcons" error="open /data/objects/77777/` + last + `: no space left on device" repeated=2449 in_last=1h0m0s`,
		`ERROR vcon_server::serve: request failed route="POST /vcons" error="open /data/objects/1: no space left on device"`,
	}
	if strings.Join(errs, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(errs, "\n"), strings.Join(want, "\n"))
	}
	if n := len(got) - len(errs); n != 2450 {
		t.Fatalf("%d info lines, want 2450", n)
	}
}

// The count of a storm that stops is written when its window ends, by the
// timer, without another line to carry it.
func TestStormFlushedByTimer(t *testing.T) {
	var buf syncBuf
	inner := &handler{w: &buf, mu: &sync.Mutex{}, level: slog.LevelInfo, component: "serve"}
	log := slog.New(newStorm(inner, 50*time.Millisecond, time.Now))
	for i := 0; i < 100; i++ {
		log.Warn("request refused: no space", "route", "POST /vcons")
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(buf.lines()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := buf.lines()
	if len(got) != 2 || !strings.HasSuffix(got[1], "repeated=99 in_last=50ms") {
		t.Fatalf("got %q", got)
	}
}

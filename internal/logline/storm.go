package logline

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// StormWindow is how long a repeated warning or error is counted instead
// of logged: the first of a window is logged whole, and the rest are one
// line at its end, "... repeated=N in_last=10s" (docs/troubleshooting.md,
// "Messages in the journal while it runs"). A full disk fails every
// request the same way; a line each would fill the journal's disk too.
const StormWindow = 10 * time.Second

// storm passes debug and info lines through and holds back repeats of a
// warning or error: the same message with the same values, digits aside
// (an error text may carry a path or an offset that differs each time).
type storm struct {
	next  slog.Handler
	attrs string // the key text of attributes given by WithAttrs
	st    *stormState
}

type stormState struct {
	mu     sync.Mutex
	window time.Duration
	now    func() time.Time
	seen   map[string]*repeat
	timer  *time.Timer
}

// repeat is one condition's window: when it started, how many lines it
// held back, and the last of them, written at the window's end.
type repeat struct {
	start time.Time
	n     int
	last  slog.Record
	h     slog.Handler
}

func newStorm(next slog.Handler, window time.Duration, now func() time.Time) *storm {
	return &storm{next: next, st: &stormState{window: window, now: now, seen: map[string]*repeat{}}}
}

func (s *storm) Enabled(ctx context.Context, l slog.Level) bool { return s.next.Enabled(ctx, l) }

func (s *storm) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	for _, a := range as {
		writeAttr(&b, a)
	}
	return &storm{next: s.next.WithAttrs(as), attrs: s.attrs + b.String(), st: s.st}
}

func (s *storm) WithGroup(name string) slog.Handler {
	return &storm{next: s.next.WithGroup(name), attrs: s.attrs, st: s.st}
}

func (s *storm) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return s.next.Handle(ctx, r)
	}
	key := s.key(r)
	st := s.st
	st.mu.Lock()
	now := st.now()
	if rp := st.seen[key]; rp != nil && now.Sub(rp.start) < st.window {
		rp.n++
		rp.last = r.Clone()
		rp.h = s.next
		st.arm(rp.start.Add(st.window).Sub(now))
		st.mu.Unlock()
		return nil
	}
	st.flushLocked(now)
	st.seen[key] = &repeat{start: now}
	st.mu.Unlock()
	return s.next.Handle(ctx, r)
}

// key is the condition a record stands for: level, message and values,
// with every run of hex digits and dashes that holds a decimal digit read
// as one (a count, an offset, a uuid in a path).
func (s *storm) key(r slog.Record) string {
	var b strings.Builder
	b.WriteString(r.Level.String())
	b.WriteByte(' ')
	b.WriteString(r.Message)
	b.WriteString(s.attrs)
	r.Attrs(func(a slog.Attr) bool {
		writeAttr(&b, a)
		return true
	})
	text := b.String()
	var out strings.Builder
	for i := 0; i < len(text); {
		j, digit := i, false
		for j < len(text) && isHex(text[j]) {
			digit = digit || text[j] >= '0' && text[j] <= '9'
			j++
		}
		switch {
		case j == i:
			out.WriteByte(text[i])
			j++
		case digit:
			out.WriteByte('#')
		default:
			out.WriteString(text[i:j])
		}
		i = j
	}
	return out.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == '-'
}

// arm makes sure the windows are flushed in d at the latest.
func (st *stormState) arm(d time.Duration) {
	if st.timer != nil {
		return
	}
	st.timer = time.AfterFunc(d, func() {
		st.mu.Lock()
		st.timer = nil
		st.flushLocked(st.now())
		st.mu.Unlock()
	})
}

// flushLocked writes the count of every window that has ended, and
// forgets the ones that held nothing back. A window that held lines back
// starts again, so a storm that goes on is one line per window.
func (st *stormState) flushLocked(now time.Time) {
	var next time.Duration
	for key, rp := range st.seen {
		end := rp.start.Add(st.window)
		if now.Before(end) {
			if d := end.Sub(now); rp.n > 0 && (next == 0 || d < next) {
				next = d
			}
			continue
		}
		if rp.n == 0 {
			delete(st.seen, key)
			continue
		}
		r := rp.last
		r.Time = now
		r.AddAttrs(slog.Int("repeated", rp.n), slog.String("in_last", st.window.String()))
		rp.h.Handle(context.Background(), r)
		st.seen[key] = &repeat{start: now}
	}
	if next > 0 {
		st.arm(next)
	}
}

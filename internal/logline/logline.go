// Package logline writes the server's log in the layout operators grep:
//
//	2026-11-30T11:33:00Z  INFO vcon_server::serve: pack run files=1 versions=1 failed=0
//
// time (RFC 3339, UTC), the level right-aligned in five columns, the
// component, the message, then key=value pairs. What is logged is counts,
// durations and error texts: never a tenant, a uuid, an object key or vCon
// content (docs/configuration.md, [log]).
package logline

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
)

// New returns a logger writing to w at level ("debug", "info", "warn",
// "error") for component ("serve", "check", ...).
func New(w io.Writer, level, component string) *slog.Logger {
	var l slog.Level
	switch level {
	case "debug":
		l = slog.LevelDebug
	case "warn":
		l = slog.LevelWarn
	case "error":
		l = slog.LevelError
	default:
		l = slog.LevelInfo
	}
	return slog.New(newStorm(&handler{w: w, mu: &sync.Mutex{}, level: l, component: component}, StormWindow, time.Now))
}

// Discard is a logger that writes nothing.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

type handler struct {
	w         io.Writer
	mu        *sync.Mutex
	level     slog.Level
	component string
	attrs     string
}

func (h *handler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *handler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	b.WriteString(t.UTC().Format(time.RFC3339))
	b.WriteByte(' ')
	fmt.Fprintf(&b, "%5s", levelName(r.Level))
	b.WriteString(" vcon_server::")
	b.WriteString(h.component)
	b.WriteString(": ")
	b.WriteString(r.Message)
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		writeAttr(&b, a)
		return true
	})
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func levelName(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "ERROR"
	case l >= slog.LevelWarn:
		return "WARN"
	case l >= slog.LevelInfo:
		return "INFO"
	}
	return "DEBUG"
}

func writeAttr(b *strings.Builder, a slog.Attr) {
	b.WriteByte(' ')
	b.WriteString(a.Key)
	b.WriteByte('=')
	v := a.Value.Resolve().String()
	if v == "" || strings.ContainsAny(v, " \"=\n") {
		v = strconv.Quote(v)
	}
	b.WriteString(v)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	for _, a := range as {
		writeAttr(&b, a)
	}
	h2 := *h
	h2.attrs += b.String()
	return &h2
}

func (h *handler) WithGroup(string) slog.Handler { return h }

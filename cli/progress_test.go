package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeProgress is a progress line on a terminal (so the test says), with
// a clock the test moves.
func fakeProgress(t *testing.T, label, what string, mib bool, total int) (*progress, *bytes.Buffer, *time.Time) {
	t.Helper()
	var buf bytes.Buffer
	p, err := startProgress(&buf, true, label, what, mib, func() (int, error) { return total, nil })
	if err != nil || p == nil {
		t.Fatalf("startProgress on a terminal: %v, %v", p, err)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return now }
	p.start, p.last = now, now
	return p, &buf, &now
}

// TestProgressLine: nothing in the first half second, then one line per
// half second with the count, the rate, the MiB/s when asked and the
// time left at that rate; done ends the line once.
func TestProgressLine(t *testing.T) {
	p, buf, now := fakeProgress(t, "check --deep", "versions opened", true, 1000)
	*now = now.Add(100 * time.Millisecond)
	for range 99 {
		p.add(1 << 20)
	}
	if buf.Len() != 0 {
		t.Fatalf("a line within the first half second: %q", buf.String())
	}
	*now = now.Add(1900 * time.Millisecond) // 2 s in: 100 versions, 100 MiB
	p.add(1 << 20)
	want := "\rcheck --deep: 100 of 1000 versions opened, 50/s, 50.0 MiB/s, about 18s left "
	if buf.String() != want {
		t.Fatalf("line %q, want %q", buf.String(), want)
	}
	*now = now.Add(400 * time.Millisecond)
	for range 99 {
		p.add(1 << 20)
	}
	if buf.String() != want {
		t.Fatalf("a second line within half a second: %q", buf.String())
	}
	*now = now.Add(1600 * time.Millisecond) // 4 s in: 200 versions
	p.add(1 << 20)
	want += "\rcheck --deep: 200 of 1000 versions opened, 50/s, 50.0 MiB/s, about 16s left "
	if buf.String() != want {
		t.Fatalf("lines %q, want %q", buf.String(), want)
	}
	p.done()
	p.done()
	if buf.String() != want+"\n" {
		t.Fatalf("done wrote %q after the lines", strings.TrimPrefix(buf.String(), want))
	}
}

// TestProgressCounts: without bytes there is no MiB/s; addN counts many
// at once; a count past the total (rows added after the count) raises
// the total; a line never written is never ended.
func TestProgressCounts(t *testing.T) {
	p, buf, now := fakeProgress(t, "master-key rotate", "data keys re-wrapped", false, 90)
	p.addN(30)
	p.done()
	if buf.Len() != 0 {
		t.Fatalf("done without a line wrote %q", buf.String())
	}
	*now = now.Add(time.Second)
	p.addN(30)
	*now = now.Add(time.Second)
	p.addN(30)
	*now = now.Add(time.Second)
	p.addN(30)
	want := "\rmaster-key rotate: 60 of 90 data keys re-wrapped, 60/s, about 1s left " +
		"\rmaster-key rotate: 90 of 90 data keys re-wrapped, 45/s, about 0s left " +
		"\rmaster-key rotate: 120 of 120 data keys re-wrapped, 40/s, about 0s left "
	if buf.String() != want {
		t.Fatalf("lines %q, want %q", buf.String(), want)
	}

	p, buf, now = fakeProgress(t, "check", "versions checked", false, 0)
	*now = now.Add(time.Second)
	p.addN(0)
	if buf.Len() != 0 {
		t.Fatalf("a line before the first item: %q", buf.String())
	}
}

// TestProgressNotATerminal: anything but a terminal gets no line and no
// count, and the nil progress takes every call.
func TestProgressNotATerminal(t *testing.T) {
	count := func() (int, error) { t.Error("counted for a writer that is not a terminal"); return 0, nil }
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	var buf bytes.Buffer
	for name, out := range map[string]interface{ Write([]byte) (int, error) }{"a file": f, "a pipe": w, "a buffer": &buf} {
		p, err := newProgress(out, "check", "versions checked", false, count)
		if p != nil || err != nil {
			t.Errorf("%s: progress %v, %v", name, p, err)
		}
		p.add(10)
		p.addN(3)
		p.done()
	}
	if fi, _ := f.Stat(); fi.Size() != 0 || buf.Len() != 0 {
		t.Errorf("wrote to a file (%d bytes) or a buffer (%q)", fi.Size(), buf.String())
	}
	if _, err := startProgress(&buf, true, "check", "versions checked", false, func() (int, error) { return 0, errors.New("no catalog") }); err == nil {
		t.Error("a failed count is not returned")
	}
}

package cli

import (
	"fmt"
	"io"
	"os"
	"time"
)

// progressEvery is how often the progress line is written again.
const progressEvery = 500 * time.Millisecond

// progress keeps one line on a terminal while a command that can run for
// minutes works through a total known up front: the count, the rate and
// an estimate of the time left, so a long run shows it moves. Written to
// anything but a terminal it does not exist: a nil *progress takes every
// call and prints nothing, so scripts and logs see only the command's own
// output.
type progress struct {
	w     io.Writer
	label string // "check --deep": the command the line is about
	what  string // "versions opened": what n counts
	mib   bool   // also the MiB/s of the bytes counted
	now   func() time.Time

	start, last time.Time
	printed     bool
	n, total    int
	bytes       int64
}

// newProgress returns the progress line of label on w, or nil when w is
// not a terminal. count gives the total and runs only on a terminal, so a
// command in a script pays nothing for it.
func newProgress(w io.Writer, label, what string, mib bool, count func() (int, error)) (*progress, error) {
	return startProgress(w, isTerminal(w), label, what, mib, count)
}

// startProgress is newProgress with the terminal test made by the caller.
func startProgress(w io.Writer, terminal bool, label, what string, mib bool, count func() (int, error)) (*progress, error) {
	if !terminal {
		return nil, nil
	}
	total, err := count()
	if err != nil {
		return nil, err
	}
	p := &progress{w: w, label: label, what: what, mib: mib, now: time.Now, total: total}
	p.start = p.now()
	p.last = p.start
	return p, nil
}

// isTerminal reports whether w is a character device, as a terminal is.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// add counts one item of the given bytes; the callbacks of the operations
// (archive.CheckOptions.Checked, MoveObjects, export.Options.Progress) are
// this method.
func (p *progress) add(bytes int64) {
	if p == nil {
		return
	}
	p.n++
	p.bytes += bytes
	p.tick()
}

// addN counts n items without bytes (archive.RotateMasterKey's callback).
func (p *progress) addN(n int) {
	if p == nil {
		return
	}
	p.n += n
	p.tick()
}

func (p *progress) tick() {
	now := p.now()
	if p.n == 0 || now.Sub(p.last) < progressEvery {
		return
	}
	p.last = now
	p.printed = true
	fmt.Fprint(p.w, p.line(now))
}

// line is the text written at now: "\r<label>: <n> of <total> <what>,
// <rate>/s[, <MiB/s> MiB/s], about <t> left ".
func (p *progress) line(now time.Time) string {
	total := max(p.total, p.n) // rows added after the count was taken
	secs := now.Sub(p.start).Seconds()
	rate := float64(p.n) / secs
	left := time.Duration(float64(total-p.n) / rate * float64(time.Second))
	mib := ""
	if p.mib {
		mib = fmt.Sprintf(", %.1f MiB/s", float64(p.bytes)/secs/(1<<20))
	}
	return fmt.Sprintf("\r%s: %d of %d %s, %.0f/s%s, about %s left ",
		p.label, p.n, total, p.what, rate, mib, left.Round(time.Second))
}

// done ends the line, if one was written, so what follows starts on a
// line of its own: at the end, and before a result line printed while the
// work goes on (the next tick starts a new progress line).
func (p *progress) done() {
	if p != nil && p.printed {
		fmt.Fprintln(p.w)
		p.printed = false
	}
}

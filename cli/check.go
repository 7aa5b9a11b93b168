package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/objstore"
)

func init() {
	var deep bool
	register(&command{
		name:    "check",
		summary: "check every kept version's stored bytes, server stopped; one JSON line per tenant; exits 1 on damage or a problem",
		flags: func(fs *flag.FlagSet) {
			deep = false
			fs.BoolVar(&deep, "deep", false, "also open every version with its data key, proving its bytes authentic")
		},
		run: func(e *env, _ *flag.FlagSet, _ []string) error { return runCheck(e, deep) },
	})
}

func runCheck(e *env, deep bool) error {
	cfg, mk, cat, release, err := e.offline("vcon-server check")
	if err != nil {
		return err
	}
	defer release()
	// Every store a version may be in, whatever the configuration now
	// says objects go to: check reports what is where.
	opt := archive.CheckOptions{Cat: cat, Key: mk, Deep: deep,
		ObjectsInBucket: cfg.Storage.Objects == "s3", Parquet: cfg.Storage.Parquet != nil}
	if opt.Dir, err = objstore.NewDir(cfg.DataDir); err != nil {
		return err
	}
	if cfg.Storage.S3 != nil {
		if opt.Bucket, err = openBucket(cfg); err != nil {
			return err
		}
	}
	var prog *progress
	if deep {
		if prog = newProgress(e.stderr); prog != nil {
			if prog.total, err = cat.CountKept(e.ctx); err != nil {
				return err
			}
			opt.Opened = prog.add
		}
	}
	c := archive.NewChecker(opt)
	tenants, err := cat.Tenants(e.ctx)
	if err != nil {
		return err
	}
	damaged, problems := 0, 0
	for _, t := range tenants {
		r, err := c.Tenant(e.ctx, t)
		if err != nil {
			return err
		}
		damaged += len(r.Damaged)
		problems += len(r.Problems)
		if err := e.emit(r); err != nil {
			return err
		}
	}
	prog.done()
	if damaged+problems > 0 {
		return fmt.Errorf("check found %d damaged version(s) and %d problem(s); the lines above name them", damaged, problems)
	}
	return nil
}

// progress prints a line on a terminal while check --deep reads: count,
// rate and an estimate of the time left, so a long run shows it moves.
type progress struct {
	w     io.Writer
	start time.Time
	last  time.Time
	n     int
	total int
	bytes int64
}

func newProgress(w io.Writer) *progress {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return &progress{w: w, start: time.Now()}
}

func (p *progress) add(n int64) {
	if p == nil {
		return
	}
	p.n++
	p.bytes += n
	if time.Since(p.last) < 500*time.Millisecond {
		return
	}
	p.last = time.Now()
	secs := time.Since(p.start).Seconds()
	rate := float64(p.n) / secs
	left := time.Duration(float64(p.total-p.n)/rate) * time.Second
	fmt.Fprintf(p.w, "\rcheck --deep: %d of %d versions opened, %.0f/s, %.1f MiB/s, about %s left ",
		p.n, p.total, rate, float64(p.bytes)/secs/(1<<20), left.Round(time.Second))
}

func (p *progress) done() {
	if p != nil {
		fmt.Fprintln(p.w)
	}
}

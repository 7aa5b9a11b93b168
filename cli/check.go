package cli

import (
	"flag"
	"fmt"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/objstore"
)

func init() {
	var deep, signatures bool
	var within string
	register(&command{
		name:    "check",
		summary: "check every kept version's stored bytes and every audit log's tree and checkpoint, server stopped; one JSON line per tenant; exits 1 on damage or a problem",
		flags: func(fs *flag.FlagSet) {
			deep, signatures, within = false, false, "0d"
			fs.BoolVar(&deep, "deep", false, "also open every version with its data key, proving its bytes authentic")
			fs.BoolVar(&signatures, "signatures", false, "instead, list the versions whose signer's certificate has expired or expires within --within, or whose trust anchor the tenant dropped (docs/signatures.md); the server may run")
			fs.StringVar(&within, "within", "0d", "with --signatures, a window such as 90d")
		},
		run: func(e *env, _ *flag.FlagSet, _ []string) error {
			if signatures {
				return checkSignatures(e, within)
			}
			return runCheck(e, deep)
		},
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
	// Plain check stats every version, --deep reads and opens it: both
	// can run for minutes at a million versions.
	label, what := "check", "versions checked"
	if deep {
		label, what = "check --deep", "versions opened"
	}
	prog, err := newProgress(e.stderr, label, what, deep, func() (int, error) { return cat.CountKept(e.ctx) })
	if err != nil {
		return err
	}
	opt.Checked = prog.add
	c := archive.NewChecker(opt)
	tenants, err := cat.Tenants(e.ctx)
	if err != nil {
		return err
	}
	logs := newLogCheck(e, cfg, cat)
	damaged, problems := 0, 0
	for _, t := range tenants {
		r, err := c.Tenant(e.ctx, t)
		if err != nil {
			return err
		}
		_, lp := logs.verify(catalog.LogID(t.ID))
		r.Problems = append(r.Problems, lp...)
		damaged += len(r.Damaged)
		problems += len(r.Problems)
		prog.done()
		if err := e.emit(r); err != nil {
			return err
		}
	}
	prog.done()
	// A tenant whose delete began is in no lookup, so no report above: its
	// key is destroyed, and what is left of it waits for the next start.
	if pending, err := cat.TenantDeletionsPending(e.ctx); err != nil {
		return err
	} else if len(pending) > 0 {
		fmt.Fprintf(e.stderr, "vcon-server: %d tenant delete(s) began and did not finish: their keys are destroyed; serve finishes them when it starts, or run vcon-server tenant delete TENANT-ID for each\n", len(pending))
	}
	n, err := logs.admin()
	if err != nil {
		return err
	}
	problems += n
	n, err = e.checkReplica(cfg, mk, cat)
	if err != nil {
		return err
	}
	problems += n
	if damaged+problems > 0 {
		return fmt.Errorf("check found %d damaged version(s) and %d problem(s); the lines above name them", damaged, problems)
	}
	return nil
}

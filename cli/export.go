package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/export"
	"github.com/vcon-server/vcon-server/internal/config"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/vcon/lawfulbasis"
)

func init() {
	var tenant, to, since, until, purpose string
	register(&command{
		name:    "export parquet",
		summary: "write a tenant's kept versions as Parquet files and a manifest to a directory or s3://bucket/prefix/ (docs/export.md)",
		flags: func(fs *flag.FlagSet) {
			tenant, to, since, until, purpose = "", "", "", "", ""
			fs.StringVar(&tenant, "tenant", "", "the tenant (id or name)")
			fs.StringVar(&to, "to", "", "an absolute directory, or s3://bucket/prefix/ (the prefix empty or ending with /)")
			fs.StringVar(&since, "since", "", "only versions stored at or after this RFC 3339 time")
			fs.StringVar(&until, "until", "", "only versions stored before this RFC 3339 time")
			fs.StringVar(&purpose, "purpose", "", "only versions a read for this purpose may see (docs/lawful-basis.md)")
		},
		run: func(e *env, _ *flag.FlagSet, _ []string) error {
			return exportParquet(e, tenant, to, since, until, purpose)
		},
	})
}

// exportParquet runs beside a serving server: it takes no lock, reads the
// catalog and the store, and writes only to the target, the tenant's audit
// log and a scratch folder it removes. Every refusal comes before the
// first file is written.
func exportParquet(e *env, tenant, to, since, until, purpose string) error {
	s, u, err := parseWindow(since, until)
	if err != nil {
		return err
	}
	if tenant == "" {
		return errors.New("export parquet needs --tenant T, the tenant's id or name")
	}
	if purpose != "" && !lawfulbasis.ValidPurpose(purpose) {
		return fmt.Errorf("--purpose %q is not 1 to %d characters of a-z, 0-9 and _: name it as the vCons' purpose_grants do", purpose, lawfulbasis.MaxPurposeLen)
	}
	target, err := export.ParseTarget(to)
	if err != nil {
		return err
	}
	cfg, mk, cat, err := e.keyed(nil)
	if err != nil {
		return err
	}
	defer cat.Close()
	// The export reads each catalog page about once: the workers' short
	// lookups queue for two readers instead of each filling a page cache
	// of its own (docs/export.md, "How fast").
	cat.LimitReaders(2)
	t, err := findTenant(e, cat, tenant)
	if err != nil {
		return err
	}
	// The store the versions live in, opened as every command but serve
	// opens it: with objects = "s3" it reads objects and packed rows from
	// the bucket.
	a, err := openArchive(e.ctx, cfg, mk, cat, parts{})
	if err != nil {
		return err
	}

	// The scratch folder holds the live ids and, for a bucket, each file
	// while it is sent, clear columns included: it lives in the data
	// directory, private to the service account, and goes at the end.
	scratch, release, err := export.NewScratch(objstore.SpoolDir(cfg.DataDir))
	if err != nil {
		return err
	}
	defer release()

	dst, err := openExportTarget(e, cfg, target, scratch)
	if err != nil {
		return err
	}

	prog, err := newProgress(e.stderr, "export parquet", "versions exported", true, func() (int, error) { return cat.CountExport(e.ctx, t.ID, s, u) })
	if err != nil {
		return err
	}
	// An interrupted export removes what it wrote before it exits.
	ctx, stop := signal.NotifyContext(e.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := export.Run(ctx, export.Options{
		Archive: a, Tenant: t, Since: s, Until: u,
		Purpose: purpose, Skew: cfg.LawfulBasis.Skew,
		Target: dst, To: target.To, Actor: catalog.CLI.Name,
		MaxVconSize: cfg.MaxVconSize, TempDir: scratch,
		Progress: prog.add,
	})
	prog.done()
	if err != nil {
		if ctx.Err() != nil && e.ctx.Err() == nil {
			return errors.New("the export was interrupted; it wrote no manifest and removed the files it had written")
		}
		if errors.Is(err, context.Canceled) {
			return errors.New("the export was cancelled; it wrote no manifest and removed the files it had written")
		}
		return err
	}
	return e.emit(res)
}

// openExportTarget opens the directory or bucket of --to; a bucket is
// reached with [export.s3], or else [storage.s3]'s service and keys.
func openExportTarget(e *env, cfg *config.Config, target export.Target, scratch string) (objstore.Store, error) {
	if !target.IsBucket() {
		return export.OpenDir(target.Dir)
	}
	table, c := "export.s3", cfg.Export.S3
	if c == nil {
		table, c = "storage.s3", cfg.Storage.S3
	}
	if c == nil {
		return nil, errors.New("an export to a bucket needs [export.s3] in the configuration, or [storage.s3], whose service and keys it then uses")
	}
	client, err := NewS3Client(table, c)
	if err != nil {
		return nil, err
	}
	return export.OpenBucket(e.ctx, client, target, scratch)
}

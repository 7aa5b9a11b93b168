package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/config"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/seal"
	"github.com/vcon-server/vcon-server/server"
	"github.com/vcon-server/vcon-server/storage"
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

// offline opens what the commands that run with the server stopped need:
// the data directory's lock (held until release), the master key and the
// catalog it opens.
func (e *env) offline(what string) (*config.Config, *seal.MasterKey, *catalog.Catalog, func(), error) {
	cfg, err := e.loadConfig()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	unlock, err := catalog.Lock(cfg.DataDir)
	if errors.Is(err, catalog.ErrLocked) {
		return nil, nil, nil, nil, fmt.Errorf("%s runs only while the server is stopped, and a vcon-server serve holds %s; stop it first (systemctl stop vcon-server)", what, cfg.DataDir)
	}
	if err != nil {
		return nil, nil, nil, nil, err
	}
	mk, err := seal.LoadMasterKey(cfg.MasterKey)
	if err != nil {
		unlock()
		return nil, nil, nil, nil, err
	}
	cat, err := server.OpenCatalog(e.ctx, cfg, mk)
	if err != nil {
		unlock()
		return nil, nil, nil, nil, err
	}
	return cfg, mk, cat, func() { cat.Close(); unlock() }, nil
}

type tenantReport struct {
	Name     string   `json:"name"`
	ID       string   `json:"id"`
	Versions int      `json:"versions"`
	Objects  int      `json:"objects"`
	Packed   int      `json:"packed"`
	Damaged  []string `json:"damaged"`
	Problems []string `json:"problems"`
}

// checker trusts nothing it can verify: it looks up every version's bytes
// in the storage that holds them, at the length the catalog records.
type checker struct {
	ctx      context.Context
	cfg      *config.Config
	arch     *archive.Archive
	stores   map[catalog.Location]objstore.Store
	packSize map[string]int64 // pack file key -> its size in storage, or -1
	deep     bool
	progress *progress
}

func runCheck(e *env, deep bool) error {
	cfg, mk, cat, release, err := e.offline("vcon-server check")
	if err != nil {
		return err
	}
	defer release()
	c := &checker{ctx: e.ctx, cfg: cfg, deep: deep, stores: map[catalog.Location]objstore.Store{}, packSize: map[string]int64{}}
	dir, err := objstore.NewDir(cfg.DataDir)
	if err != nil {
		return err
	}
	c.stores[catalog.InDir] = dir
	if cfg.Storage.S3 != nil {
		s3, err := storage.OpenS3(cfg.Storage.S3, cfg.Storage.S3.Bucket, cfg.Storage.S3.Prefix, cfg.DataDir)
		if err != nil {
			return err
		}
		c.stores[catalog.InS3], c.stores[catalog.Packed] = s3, s3
	}
	c.arch = &archive.Archive{Config: archive.Config{Cat: cat, Key: mk}}
	if deep {
		if c.progress = newProgress(e.stderr); c.progress != nil {
			if c.progress.total, err = cat.CountKept(e.ctx); err != nil {
				return err
			}
		}
	}
	tenants, err := cat.Tenants(e.ctx)
	if err != nil {
		return err
	}
	damaged, problems := 0, 0
	for _, t := range tenants {
		r, err := c.tenant(cat, t)
		if err != nil {
			return err
		}
		damaged += len(r.Damaged)
		problems += len(r.Problems)
		if err := e.emit(r); err != nil {
			return err
		}
	}
	c.progress.done()
	if damaged+problems > 0 {
		return fmt.Errorf("check found %d damaged version(s) and %d problem(s); the lines above name them", damaged, problems)
	}
	return nil
}

func (c *checker) tenant(cat *catalog.Catalog, t catalog.Tenant) (tenantReport, error) {
	r := tenantReport{Name: t.Name, ID: t.ID.String(), Damaged: []string{}, Problems: []string{}}
	inDir := 0
	err := cat.EachKept(c.ctx, t.ID, func(v catalog.Version) error {
		r.Versions++
		if v.Location == catalog.Packed {
			r.Packed++
		} else {
			r.Objects++
		}
		if v.Location == catalog.InDir && c.cfg.Storage.Objects == "s3" {
			inDir++
		}
		ok, err := c.version(v)
		if err != nil {
			return err
		}
		if !ok {
			r.Damaged = append(r.Damaged, v.ID.String())
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	if inDir > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("%d version(s) are objects in the data directory, and the configuration keeps objects in a bucket: serve refuses to start until vcon-server storage move-objects moves them", inDir))
	}
	if s3 := c.stores[catalog.Packed]; s3 != nil {
		c.arch.Objects, c.arch.Loc = s3, catalog.InS3
		unnamed, err := c.arch.UnnamedPackFiles(c.ctx, t.ID)
		if err != nil {
			return r, err
		}
		for _, key := range unnamed {
			r.Problems = append(r.Problems, fmt.Sprintf("the pack file %s is named by no catalog row: it may hold the only copy of rows that a catalog restored from a backup can open, so nothing deletes it; delete it by hand once you know no backup needs it", key))
		}
	}
	if r.Packed > 0 && c.cfg.Storage.Parquet == nil {
		r.Problems = append(r.Problems, fmt.Sprintf("%d version(s) are packed into Parquet files, and the configuration has no [storage.parquet]: serve refuses to start until the table is put back", r.Packed))
	}
	return r, nil
}

// version reports whether v's bytes are where the catalog says, at its
// length, and with --deep that they open with its key.
func (c *checker) version(v catalog.Version) (bool, error) {
	store := c.stores[v.Location]
	if store == nil {
		return false, nil // in a bucket the configuration no longer names
	}
	if v.Location == catalog.Packed {
		size, err := c.packFileSize(store, v.PackKey)
		if err != nil {
			return false, err
		}
		if size < 0 || v.PackOffset+v.PackLength > size || v.PackLength != v.SealedSize {
			return false, nil
		}
	} else {
		info, err := store.Stat(c.ctx, archive.ObjectKey(v.Location, v.Tenant, v.ID))
		if errors.Is(err, objstore.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("check: %w", err)
		}
		if info.Size != v.SealedSize {
			return false, nil
		}
	}
	if !c.deep {
		return true, nil
	}
	c.arch.Objects = store
	rc, err := c.arch.OpenVersion(c.ctx, v)
	if err == nil {
		var n int64
		n, err = io.Copy(io.Discard, rc)
		rc.Close()
		if err == nil && n != v.Size {
			err = archive.ErrDamaged
		}
		c.progress.add(v.SealedSize)
	}
	if err != nil {
		if errors.Is(err, seal.ErrDamaged) || errors.Is(err, archive.ErrDamaged) || errors.Is(err, objstore.ErrNotFound) {
			return false, nil
		}
		return false, fmt.Errorf("check: %w", err)
	}
	return true, nil
}

// packFileSize stats each pack file once: -1 when it is missing.
func (c *checker) packFileSize(store objstore.Store, key string) (int64, error) {
	if key == "" {
		return -1, nil
	}
	if size, ok := c.packSize[key]; ok {
		return size, nil
	}
	info, err := store.Stat(c.ctx, key)
	size := info.Size
	if errors.Is(err, objstore.ErrNotFound) {
		size, err = -1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("check: %w", err)
	}
	c.packSize[key] = size
	return size, nil
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

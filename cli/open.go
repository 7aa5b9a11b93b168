package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/config"
	"github.com/vcon-server/vcon-server/internal/s3sig"
	"github.com/vcon-server/vcon-server/internal/secretfile"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/replica"
	"github.com/vcon-server/vcon-server/seal"
)

// This file turns the configuration into running parts: the master key,
// the catalog it opens, a vetted object store and a whole archive.Archive.
// No other package reads the configuration; every refusal here names the
// key or file to change.

// loadConfig reads the configuration named by --config.
func (e *env) loadConfig() (*config.Config, error) {
	if _, err := os.Stat(e.config); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("configuration file %s does not exist; write one (see docs/configuration.md) or name it with --config", e.config)
	}
	cfg, err := config.Load(e.config)
	e.opened = cfg
	return cfg, err
}

// openCatalog opens the catalog beside a running server, if any, for the
// commands that change tenants, keys and holds: they need no master key.
func (e *env) openCatalog() (*config.Config, *catalog.Catalog, error) {
	cfg, err := e.loadConfig()
	if err != nil {
		return nil, nil, err
	}
	cat, err := catalog.Open(e.ctx, cfg.DataDir)
	if errors.Is(err, catalog.ErrMissing) {
		return nil, nil, fmt.Errorf("the data directory %s has no catalog; run vcon-server init --config %s first", cfg.DataDir, e.config)
	}
	return cfg, cat, err
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
	mk, cat, err := openKeyed(e.ctx, cfg)
	if err != nil {
		unlock()
		return nil, nil, nil, nil, err
	}
	return cfg, mk, cat, func() { cat.Close(); unlock() }, nil
}

// keyed loads the configuration, then the master key and the catalog it
// opens (openKeyed), for the commands that run beside a server and need
// the key. vet, when not nil, checks the configuration first, so that
// what it refuses opens nothing. The caller closes the catalog.
func (e *env) keyed(vet func(*config.Config) error) (*config.Config, *seal.MasterKey, *catalog.Catalog, error) {
	cfg, err := e.loadConfig()
	if err != nil {
		return nil, nil, nil, err
	}
	if vet != nil {
		if err := vet(cfg); err != nil {
			return nil, nil, nil, err
		}
	}
	mk, cat, err := openKeyed(e.ctx, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, mk, cat, nil
}

// openKeyed loads the master key and opens the data directory's catalog,
// proving the key is the one it was made with.
func openKeyed(ctx context.Context, cfg *config.Config) (*seal.MasterKey, *catalog.Catalog, error) {
	mk, wrapped, err := loadMasterKey(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	cat, err := catalog.Open(ctx, cfg.DataDir)
	if errors.Is(err, catalog.ErrMissing) {
		return nil, nil, fmt.Errorf("the data directory %s has no catalog; run vcon-server init --config %s first", cfg.DataDir, cfg.Path)
	}
	if err != nil {
		return nil, nil, err
	}
	if err := boundTo(cfg, wrapped, cat); err != nil {
		cat.Close()
		return nil, nil, err
	}
	check, rotated, err := cat.KeyCheck(ctx)
	if err != nil {
		cat.Close()
		return nil, nil, err
	}
	if string(check) != string(mk.CheckValue()) {
		cat.Close()
		if rotated {
			return nil, nil, fmt.Errorf("the master key %s does not open this catalog: a master-key rotation replaced it; set master_key to the new key file", cfg.MasterKey)
		}
		return nil, nil, fmt.Errorf("the master key %s does not open this catalog (its check value differs); use the key file init made for the data directory %s", cfg.MasterKey, cfg.DataDir)
	}
	return mk, cat, nil
}

// parts say how openArchive builds an Archive.
type parts struct {
	// serve: the start checks of serve (versioning, Object Lock, the
	// binding marker, packed versions without [storage.parquet]) and
	// Parquet storage on. Other commands only read, and only refuse what
	// would make them read from the wrong place.
	serve  bool
	log    *slog.Logger
	now    func() time.Time
	purged func(int)
	// wrap decorates the object store (serve's metrics).
	wrap func(objstore.Store) objstore.Store
	// replica is told of every purge (nil: none).
	replica *replica.Replica
}

// openArchive makes the Archive of the configuration over cat: the object
// store it names, vetted, and Parquet storage when serve runs with it.
func openArchive(ctx context.Context, cfg *config.Config, mk *seal.MasterKey, cat *catalog.Catalog, p parts) (*archive.Archive, error) {
	objects, loc, err := openStore(ctx, cfg, cat, p.serve)
	if err != nil {
		return nil, err
	}
	if p.wrap != nil {
		objects = p.wrap(objects)
	}
	c := archive.Config{
		Cat: cat, Objects: objects, Loc: loc, Key: mk,
		MaxSize: cfg.MaxVconSize, DefaultRetention: cfg.Retention.Default, LawfulSkew: cfg.LawfulBasis.Skew,
		Log: p.log, Now: p.now, Purged: p.purged, DataDir: cfg.DataDir,
	}
	if p.replica != nil {
		c.Replica = p.replica
	}
	if k := cfg.KMS; k != nil {
		c.KeyServices, c.KeyCache, c.KMSTenantKeys = newKeyServices(cfg), k.KeyCache, k.TenantKeys == "kms"
	}
	if pq := cfg.Storage.Parquet; pq != nil && p.serve {
		c.Parquet = &archive.ParquetOptions{PackLimit: pq.PackLimit, ReaderGrace: pq.ReaderGrace, SpoolDir: objstore.SpoolDir(cfg.DataDir)}
	}
	return archive.New(c)
}

// openStore returns the configured store and the location kind of its
// objects, refusing a configuration that would read from the wrong place.
func openStore(ctx context.Context, cfg *config.Config, cat *catalog.Catalog, serve bool) (objstore.Store, catalog.Location, error) {
	counts, err := cat.CountByLocation(ctx)
	if err != nil {
		return nil, "", err
	}
	if cfg.Storage.Objects != "s3" {
		if n := counts[catalog.InS3] + counts[catalog.Packed]; n > 0 {
			return nil, "", fmt.Errorf("%d version(s) are in a bucket, but the configuration has storage.objects = \"dir\"; put back the [storage] and [storage.s3] tables that name the bucket (versions are never moved back from a bucket)", n)
		}
		dir, err := objstore.NewDir(cfg.DataDir)
		if err != nil {
			return nil, "", err
		}
		return dir, catalog.InDir, nil
	}
	if n := counts[catalog.InDir]; n > 0 {
		return nil, "", fmt.Errorf("%d version(s) are still objects in the data directory %s, but the configuration has storage.objects = \"s3\"; with the server stopped, run vcon-server storage move-objects --config %s to move them into the bucket", n, cfg.DataDir, cfg.Path)
	}
	s3, err := openBucket(cfg)
	if err != nil {
		return nil, "", err
	}
	if serve {
		if err := vetBucket(ctx, s3, cfg.Storage.S3, cfg.Storage.Parquet != nil); err != nil {
			return nil, "", err
		}
		if n := counts[catalog.Packed]; n > 0 && cfg.Storage.Parquet == nil {
			tenants, err := cat.TenantsWithPacked(ctx)
			if err != nil {
				return nil, "", err
			}
			return nil, "", fmt.Errorf("%d tenant(s) have versions packed into Parquet files, and the configuration has no [storage.parquet]: without it the server packs no more, and the start no longer refuses a bucket with Object Lock or versioning, either of which keeps the bytes of a pack file that a purge rewrote; put the [storage.parquet] table back, since packed versions cannot be turned back into objects; vcon-server check names the tenants", tenants)
		}
		if err := archive.Bind(ctx, s3, cat.ID); err != nil {
			return nil, "", err
		}
	}
	return s3, catalog.InS3, nil
}

// openBucket makes the store of [storage.s3], spooling uploads in the data
// directory.
func openBucket(cfg *config.Config) (*objstore.S3, error) {
	c := cfg.Storage.S3
	client, err := NewS3Client("storage.s3", c)
	if err != nil {
		return nil, err
	}
	spool := objstore.SpoolDir(cfg.DataDir)
	if err := os.MkdirAll(spool, 0o700); err != nil {
		return nil, err
	}
	return objstore.NewS3(client, c.Bucket, c.Prefix, spool), nil
}

// NewS3Client makes the S3 client of a configuration table ("storage.s3",
// "export.s3"), reading its secret key file. Every command that reaches a
// bucket makes its client here, so every one refuses a secret key file
// that others may read. Tests use it to read a server's bucket as a
// second client would.
func NewS3Client(table string, c *config.S3) (*s3sig.Client, error) {
	secret, err := readSecret(c.SecretAccessKeyFile)
	if err != nil {
		return nil, fmt.Errorf("configuration: %s.secret_access_key_file: %s %w", table, c.SecretAccessKeyFile, err)
	}
	return s3sig.New(s3sig.Config{
		Endpoint:    c.Endpoint,
		Region:      c.Region,
		Credentials: s3sig.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: strings.TrimSpace(string(secret))},
		PathStyle:   c.PathStyle,
		CAFile:      c.CAFile,
	})
}

// readSecret reads a secret key file: whoever reads it can sign requests
// to the bucket (internal/secretfile).
func readSecret(path string) ([]byte, error) { return secretfile.Read(path, 64<<10) }

// vetBucket refuses a bucket whose settings would keep bytes a purge
// deletes. Object Lock is read first: a bucket with it always reports
// versioning too, and its operator must see why (docs/s3.md).
func vetBucket(ctx context.Context, s *objstore.S3, c *config.S3, parquet bool) error {
	bucket := c.Bucket
	if parquet {
		locked, err := s.ObjectLock(ctx)
		if err != nil {
			return fmt.Errorf("the storage cannot be used: reading the Object Lock setting of bucket %q: %w", bucket, err)
		}
		if locked {
			return fmt.Errorf("the storage cannot be used: bucket %q has Object Lock on, which can refuse to delete a file a purge rewrote; Parquet storage (storage.parquet) needs a bucket without Object Lock", bucket)
		}
	}
	status, err := s.Versioning(ctx)
	if err != nil {
		return fmt.Errorf("the storage cannot be used: reading the versioning of bucket %q: %w", bucket, err)
	}
	if status == "" {
		return nil
	}
	if parquet {
		return fmt.Errorf("the storage cannot be used: bucket %q has versioning %s, which keeps a deleted file's bytes as an earlier version; Parquet storage (storage.parquet) needs a bucket that was never versioned, and storage.s3.allow_versioning does not apply", bucket, status)
	}
	if !c.AllowVersioning {
		return fmt.Errorf("the storage cannot be used: bucket %q has versioning %s, which keeps a deleted object's bytes as an earlier version, so a purge could not remove them; use a bucket that was never versioned, or set storage.s3.allow_versioning = true to accept that", bucket, status)
	}
	return nil
}

// Package storage opens the object store the configuration names and
// checks, before anything is written, that it may be used: the bucket's
// versioning and Object Lock, the bucket's binding to this catalog, and
// that the catalog's versions live where the configuration says.
package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/config"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/s3sig"
)

// MarkerKey names the object that binds a bucket and prefix to one catalog.
const MarkerKey = "catalog-id"

// Options say which checks a command needs.
type Options struct {
	// Serve: the start checks of serve (versioning, Object Lock, the
	// binding marker, packed versions without [storage.parquet]). Other
	// commands only read, and only refuse what would make them read from
	// the wrong place.
	Serve bool
}

// Open returns the configured store and the location kind of its objects.
func Open(ctx context.Context, cfg *config.Config, cat *catalog.Catalog, opt Options) (objstore.Store, catalog.Location, error) {
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
	s3, err := OpenS3(cfg.Storage.S3, cfg.Storage.S3.Bucket, cfg.Storage.S3.Prefix, cfg.DataDir)
	if err != nil {
		return nil, "", err
	}
	if opt.Serve {
		if err := CheckBucket(ctx, s3, cfg.Storage.S3, cfg.Storage.Parquet != nil); err != nil {
			return nil, "", err
		}
		if n := counts[catalog.Packed]; n > 0 && cfg.Storage.Parquet == nil {
			tenants, err := cat.TenantsWithPacked(ctx)
			if err != nil {
				return nil, "", err
			}
			return nil, "", fmt.Errorf("%d tenant(s) have versions packed into Parquet files, and the configuration has no [storage.parquet]: without it the server packs no more, and the start no longer refuses a bucket with Object Lock or versioning, either of which keeps the bytes of a pack file that a purge rewrote; put the [storage.parquet] table back, since packed versions cannot be turned back into objects; vcon-server check names the tenants", tenants)
		}
		if err := Bind(ctx, s3, cat); err != nil {
			return nil, "", err
		}
	}
	return s3, catalog.InS3, nil
}

// SpoolDir is where uploads to a bucket are spooled: sealed bytes only.
func SpoolDir(dataDir string) string { return filepath.Join(dataDir, "spool") }

// OpenS3 makes the store of bucket and prefix with c's service and keys.
func OpenS3(c *config.S3, bucket, prefix, dataDir string) (*objstore.S3, error) {
	client, err := NewClient("storage.s3", c)
	if err != nil {
		return nil, err
	}
	spool := SpoolDir(dataDir)
	if err := os.MkdirAll(spool, 0o700); err != nil {
		return nil, err
	}
	return objstore.NewS3(client, bucket, prefix, spool), nil
}

// NewClient makes the S3 client of a configuration table ("storage.s3",
// "export.s3"), reading its secret key file.
func NewClient(table string, c *config.S3) (*s3sig.Client, error) {
	secret, err := os.ReadFile(c.SecretAccessKeyFile)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is named once, below
		}
		return nil, fmt.Errorf("configuration: %s.secret_access_key_file: %s cannot be read: %w", table, c.SecretAccessKeyFile, err)
	}
	return s3sig.New(s3sig.Config{
		Endpoint:    c.Endpoint,
		Region:      c.Region,
		Credentials: s3sig.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: strings.TrimSpace(string(secret))},
		PathStyle:   c.PathStyle,
		CAFile:      c.CAFile,
	})
}

// CheckBucket refuses a bucket whose settings would keep bytes a purge
// deletes. Object Lock is read first: a bucket with it always reports
// versioning too, and its operator must see why (docs/s3.md).
func CheckBucket(ctx context.Context, s *objstore.S3, c *config.S3, parquet bool) error {
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

// Bind proves the bucket and prefix belong to this catalog: the first
// start writes the marker create-only; every later start reads it. Two
// catalogs on one prefix would delete each other's objects as orphans.
func Bind(ctx context.Context, s objstore.Store, cat *catalog.Catalog) error {
	want := cat.ID.String() + "\n"
	err := objstore.Put(ctx, s, MarkerKey, strings.NewReader(want), true)
	if err == nil {
		return nil
	}
	if !errors.Is(err, objstore.ErrExists) {
		return fmt.Errorf("the storage cannot be used: writing the catalog marker to %s: %w", s, err)
	}
	rc, err := s.Get(ctx, MarkerKey)
	if err != nil {
		return fmt.Errorf("the storage cannot be used: reading the catalog marker of %s: %w", s, err)
	}
	defer rc.Close()
	got, err := io.ReadAll(io.LimitReader(rc, 256))
	if err != nil {
		return fmt.Errorf("the storage cannot be used: reading the catalog marker of %s: %w", s, err)
	}
	if !bytes.Equal(got, []byte(want)) {
		return fmt.Errorf("the storage cannot be used: %s belongs to another catalog (its %s names %s, this catalog is %s); give each server its own bucket or prefix", s, MarkerKey, strings.TrimSpace(string(got)), cat.ID)
	}
	return nil
}

// RemoveStaleSpool removes spooled uploads older than age: a crash left
// them (they hold sealed bytes only). Younger ones may belong to a CLI
// command running beside the server.
func RemoveStaleSpool(dataDir string, age time.Duration) (int, error) {
	entries, err := os.ReadDir(SpoolDir(dataDir))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || e.IsDir() || time.Since(info.ModTime()) < age {
			continue
		}
		if os.Remove(filepath.Join(SpoolDir(dataDir), e.Name())) == nil {
			n++
		}
	}
	return n, nil
}

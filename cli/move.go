package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/ids"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/storage"
)

func init() {
	register(&command{
		name:    "storage move-objects",
		summary: "move every object of the data directory into the bucket of [storage.s3], server stopped; resumable",
		run:     runMoveObjects,
	})
}

// sampleLen is how much of each object's head and tail is read back from
// the bucket and compared before the local copy is removed.
const sampleLen = 64 << 10

// runMoveObjects moves objects one at a time, each in the order the
// format requires: copy, verify, commit the new location, then delete
// the old copy (docs/FORMAT.md, "Moving objects"). A run cut off anywhere
// is finished by the next run.
func runMoveObjects(e *env, _ *flag.FlagSet, _ []string) error {
	cfg, _, cat, release, err := e.offline("vcon-server storage move-objects")
	if err != nil {
		return err
	}
	defer release()
	if cfg.Storage.S3 == nil {
		return fmt.Errorf("storage move-objects moves objects into the bucket that [storage.s3] names, and the configuration %s has no [storage.s3] table", cfg.Path)
	}
	dir, err := objstore.NewDir(cfg.DataDir)
	if err != nil {
		return err
	}
	bucket, err := storage.OpenS3(cfg.Storage.S3, cfg.Storage.S3.Bucket, cfg.Storage.S3.Prefix, cfg.DataDir)
	if err != nil {
		return err
	}
	if err := storage.CheckBucket(e.ctx, bucket, cfg.Storage.S3, cfg.Storage.Parquet != nil); err != nil {
		return err
	}
	if err := storage.Bind(e.ctx, bucket, cat); err != nil {
		return err
	}
	m := mover{ctx: e.ctx, cat: cat, dir: dir, bucket: bucket}
	if err := cat.EachAt(e.ctx, catalog.InDir, m.move); err != nil {
		return err
	}
	if err := m.sweepLocal(); err != nil {
		return err
	}
	return e.emit(map[string]any{"to": bucket.String(), "moved": m.moved, "bytes": m.bytes, "tombstones": m.tombstones, "leftovers_removed": m.leftovers})
}

type mover struct {
	ctx                          context.Context
	cat                          *catalog.Catalog
	dir, bucket                  objstore.Store
	moved, tombstones, leftovers int
	bytes                        int64
}

func (m *mover) move(v catalog.Version) error {
	src := archive.ObjectKey(catalog.InDir, v.Tenant, v.ID)
	dst := archive.ObjectKey(catalog.InS3, v.Tenant, v.ID)
	rc, err := m.dir.Get(m.ctx, src)
	if errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("version %s of tenant %s has no object in the data directory; run vcon-server check, which reports it as damaged", v.ID, v.Tenant)
	}
	if err != nil {
		return err
	}
	// Create-only: a copy left by a cut-off run is kept and verified, never
	// replaced blindly.
	err = objstore.Put(m.ctx, m.bucket, dst, rc, true)
	rc.Close()
	if err != nil && !errors.Is(err, objstore.ErrExists) {
		return fmt.Errorf("copy version %s to the bucket: %w", v.ID, err)
	}
	if err := m.verify(src, dst, v.SealedSize); err != nil {
		return fmt.Errorf("version %s: %w", v.ID, err)
	}
	crashpoint.Hit(crashpoint.MoveAfterCopy)
	if err := m.cat.Update(m.ctx, func(tx *catalog.Tx) error { return tx.MoveVersion(v.ID, catalog.InDir, catalog.InS3) }); err != nil {
		return err
	}
	crashpoint.Hit(crashpoint.MoveAfterCommit)
	if err := m.dir.Delete(m.ctx, src); err != nil {
		return err
	}
	m.moved++
	m.bytes += v.SealedSize
	return nil
}

// verify proves the bucket's copy has the catalog's length and the same
// first and last bytes as the local one.
func (m *mover) verify(src, dst string, size int64) error {
	info, err := m.bucket.Stat(m.ctx, dst)
	if err != nil {
		return fmt.Errorf("the bucket's copy cannot be read back: %w", err)
	}
	if info.Size != size {
		return fmt.Errorf("the bucket's copy has %d bytes, the catalog says %d; the local copy is kept", info.Size, size)
	}
	n := min(size, sampleLen)
	for _, off := range []int64{0, size - n} {
		a, err := readRange(m.ctx, m.dir, src, off, n)
		if err != nil {
			return err
		}
		b, err := readRange(m.ctx, m.bucket, dst, off, n)
		if err != nil {
			return err
		}
		if !bytes.Equal(a, b) {
			return errors.New("the bucket's copy differs from the local one; the local copy is kept")
		}
	}
	return nil
}

func readRange(ctx context.Context, s objstore.Store, key string, off, n int64) ([]byte, error) {
	rc, err := s.GetRange(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// sweepLocal moves the purge tombstones too, so a start on a restored
// catalog still finds them, and removes local objects a cut-off run left
// after committing their move, or whose store never committed.
func (m *mover) sweepLocal() error {
	var tombs, stale []string
	err := m.dir.List(m.ctx, "", func(info objstore.Info) error {
		parts := strings.Split(info.Key, "/")
		if len(parts) != 3 {
			return nil
		}
		switch parts[0] {
		case "purged":
			tombs = append(tombs, info.Key)
		case "objects":
			id, err := ids.Parse(parts[2])
			if err != nil {
				return nil
			}
			v, err := m.cat.Version(m.ctx, id)
			if errors.Is(err, catalog.ErrNotFound) || (err == nil && v.Location != catalog.InDir) {
				stale = append(stale, info.Key)
			} else if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, key := range tombs {
		parts := strings.Split(key, "/")
		if err := objstore.Put(m.ctx, m.bucket, "tenants/"+parts[1]+"/purged/"+parts[2], bytes.NewReader(nil), false); err != nil {
			return fmt.Errorf("copy a purge tombstone to the bucket: %w", err)
		}
		if err := m.dir.Delete(m.ctx, key); err != nil {
			return err
		}
		m.tombstones++
	}
	for _, key := range stale {
		if err := m.dir.Delete(m.ctx, key); err != nil {
			return err
		}
		m.leftovers++
	}
	return nil
}

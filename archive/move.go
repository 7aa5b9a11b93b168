package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/objstore"
)

// sampleLen is how much of each object's head and tail is read back from
// the bucket and compared before the local copy is removed.
const sampleLen = 64 << 10

// MoveStats count what MoveObjects did.
type MoveStats struct {
	Moved      int   // objects moved
	Bytes      int64 // their sealed bytes
	Tombstones int   // purge tombstones copied
	Leftovers  int   // local objects a cut-off run or store left, removed
}

// MoveObjects moves every object of the data directory's store dir into
// a's bucket, one at a time, each in the order the format requires: copy,
// verify, commit the new location, then delete the old copy
// (docs/FORMAT.md, "Move objects"). The server is stopped. A run cut off
// anywhere is finished by the next run. moved, when not nil, is told the
// sealed size of each object once it is moved, for a progress line.
func (a *Archive) MoveObjects(ctx context.Context, dir objstore.Store, moved func(sealed int64)) (MoveStats, error) {
	if a.Loc != catalog.InS3 {
		return MoveStats{}, errors.New("objects are moved into a bucket, and this archive's objects are in the data directory")
	}
	m := mover{ctx: ctx, cat: a.Cat, dir: dir, bucket: a.Objects, moved: moved}
	if err := a.Cat.EachAt(ctx, catalog.InDir, m.move); err != nil {
		return m.st, err
	}
	return m.st, m.sweepLocal()
}

type mover struct {
	ctx         context.Context
	cat         *catalog.Catalog
	dir, bucket objstore.Store
	st          MoveStats
	moved       func(sealed int64)
}

func (m *mover) move(v catalog.Version) error {
	src := ObjectKey(catalog.InDir, v.Tenant, v.ID)
	dst := ObjectKey(catalog.InS3, v.Tenant, v.ID)
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
	m.st.Moved++
	m.st.Bytes += v.SealedSize
	if m.moved != nil {
		m.moved(v.SealedSize)
	}
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

// sweepLocal moves the purge count and the purge tombstones too, so a
// start on a restored catalog still finds them, and removes local objects
// a cut-off run left after committing their move, or whose store never
// committed.
func (m *mover) sweepLocal() error {
	var tombs, stale []string
	err := m.dir.List(m.ctx, "", func(info objstore.Info) error {
		kind, _, id, ok := dirKey(info.Key)
		switch {
		case !ok:
		case kind == kindPurged:
			tombs = append(tombs, info.Key)
		case kind == kindObjects:
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
	// The purge count goes before the tombstones, as a purge writes them
	// (docs/FORMAT.md, "Purge of an object"); the bucket's is never lowered.
	local, _, err := readCount(m.ctx, m.dir)
	if err != nil {
		return err
	}
	inBucket, _, err := readCount(m.ctx, m.bucket)
	if err != nil {
		return err
	}
	if local > max(inBucket, 0) {
		if err := writeCount(m.ctx, m.bucket, local); err != nil {
			return fmt.Errorf("copy the purge count to the bucket: %w", err)
		}
	}
	for _, key := range tombs {
		_, tenant, version, _ := dirKey(key)
		if err := objstore.Put(m.ctx, m.bucket, TombstoneKey(catalog.InS3, tenant, version), bytes.NewReader(nil), false); err != nil {
			return fmt.Errorf("copy a purge tombstone to the bucket: %w", err)
		}
		if err := m.dir.Delete(m.ctx, key); err != nil {
			return err
		}
		m.st.Tombstones++
	}
	if err := m.dir.Delete(m.ctx, PurgeCountKey); err != nil {
		return err
	}
	for _, key := range stale {
		if err := m.dir.Delete(m.ctx, key); err != nil {
			return err
		}
		m.st.Leftovers++
	}
	return nil
}

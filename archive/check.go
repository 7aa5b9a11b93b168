package archive

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/seal"
)

// CheckOptions say where check reads and what the configuration promises.
type CheckOptions struct {
	Cat *catalog.Catalog
	Key *seal.MasterKey
	// Dir is the data directory's store; Bucket the bucket's, or nil
	// without [storage.s3]. A version whose store is nil is damaged.
	Dir, Bucket objstore.Store
	// ObjectsInBucket: the configuration keeps objects in the bucket, so a
	// version still in the data directory is a problem.
	ObjectsInBucket bool
	// Parquet: the configuration has Parquet storage, so packed versions
	// are served.
	Parquet bool
	// Deep also opens every version with its data key.
	Deep bool
	// Checked, when set, is told the sealed size of each version once it
	// is checked (opened too with Deep), damaged or not, for a progress
	// line.
	Checked func(sealed int64)
}

// TenantReport is what check finds of one tenant.
type TenantReport struct {
	Name     string   `json:"name"`
	ID       string   `json:"id"`
	Versions int      `json:"versions"`
	Objects  int      `json:"objects"`
	Packed   int      `json:"packed"`
	Damaged  []string `json:"damaged"`
	Problems []string `json:"problems"`
}

// Checker trusts nothing it can verify (docs/FORMAT.md, "What check
// verifies"): it looks up every kept version's bytes in the store that
// holds them, at the length the catalog records, and with Deep opens them.
type Checker struct {
	opt     CheckOptions
	readers map[catalog.Location]*Archive // one per store, whole, read-only
	packs   map[string]packCheck          // pack file key -> what its one HEAD found
	// wrongLength names the pack files of the tenant being checked whose
	// length in storage is not the catalog's, for its problems.
	wrongLength []string
}

// packCheck is what check found of one pack file: its length in storage
// (-1 when missing) and whether that is the length the catalog recorded.
type packCheck struct {
	size  int64
	whole bool
}

// NewChecker makes a Checker; it writes nothing anywhere.
func NewChecker(opt CheckOptions) *Checker {
	c := &Checker{opt: opt, readers: map[catalog.Location]*Archive{}, packs: map[string]packCheck{}}
	reader := func(s objstore.Store, loc catalog.Location) *Archive {
		return &Archive{Config: Config{Cat: opt.Cat, Objects: s, Loc: loc, Key: opt.Key}}
	}
	c.readers[catalog.InDir] = reader(opt.Dir, catalog.InDir)
	if opt.Bucket != nil {
		c.readers[catalog.InS3] = reader(opt.Bucket, catalog.InS3)
		c.readers[catalog.Packed] = c.readers[catalog.InS3]
	}
	return c
}

// Tenant checks one tenant's kept versions and pack files.
func (c *Checker) Tenant(ctx context.Context, t catalog.Tenant) (TenantReport, error) {
	r := TenantReport{Name: t.Name, ID: t.ID.String(), Damaged: []string{}, Problems: []string{}}
	inDir := 0
	c.wrongLength = c.wrongLength[:0]
	err := c.opt.Cat.EachKept(ctx, t.ID, func(v catalog.Version) error {
		r.Versions++
		if v.Location == catalog.Packed {
			r.Packed++
		} else {
			r.Objects++
		}
		if v.Location == catalog.InDir && c.opt.ObjectsInBucket {
			inDir++
		}
		ok, err := c.version(ctx, v)
		if err != nil {
			return err
		}
		if c.opt.Checked != nil {
			c.opt.Checked(v.SealedSize)
		}
		if !ok {
			r.Damaged = append(r.Damaged, v.ID.String())
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	r.Problems = append(r.Problems, c.wrongLength...)
	if inDir > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("%d version(s) are objects in the data directory, and the configuration keeps objects in a bucket: serve refuses to start until vcon-server storage move-objects moves them", inDir))
	}
	if bucket := c.readers[catalog.Packed]; bucket != nil {
		unnamed, err := bucket.UnnamedPackFiles(ctx, t.ID)
		if err != nil {
			return r, err
		}
		for _, key := range unnamed {
			r.Problems = append(r.Problems, fmt.Sprintf("the pack file %s is named by no catalog row: it may hold the only copy of rows that a catalog restored from a backup can open, so nothing deletes it; delete it by hand once you know no backup needs it", key))
		}
	}
	if r.Packed > 0 && !c.opt.Parquet {
		r.Problems = append(r.Problems, fmt.Sprintf("%d version(s) are packed into Parquet files, and the configuration has no [storage.parquet]: serve refuses to start until the table is put back", r.Packed))
	}
	return r, nil
}

// version reports whether v's bytes are where the catalog says, at its
// length, and with Deep that they open with its key.
func (c *Checker) version(ctx context.Context, v catalog.Version) (bool, error) {
	a := c.readers[v.Location]
	if a == nil {
		return false, nil // in a bucket the configuration no longer names
	}
	if v.Location == catalog.Packed {
		f, err := c.packFile(ctx, a.Objects, v)
		if err != nil {
			return false, err
		}
		if !f.whole || v.PackOffset+v.PackLength > f.size || v.PackLength != v.SealedSize {
			return false, nil
		}
	} else {
		info, err := a.Objects.Stat(ctx, ObjectKey(v.Location, v.Tenant, v.ID))
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
	if !c.opt.Deep {
		return true, nil
	}
	rc, err := a.OpenVersion(ctx, v)
	if err == nil {
		var n int64
		n, err = io.Copy(io.Discard, rc)
		rc.Close()
		if err == nil && n != v.Size {
			err = ErrDamaged
		}
	}
	if err != nil {
		if errors.Is(err, seal.ErrDamaged) || errors.Is(err, ErrDamaged) || errors.Is(err, objstore.ErrNotFound) {
			return false, nil
		}
		return false, fmt.Errorf("check: %w", err)
	}
	return true, nil
}

// packFile stats the file of a packed version once, and compares its
// length with the one the catalog recorded when the file went live: a file
// of another length holds none of its rows where the catalog says, and a
// purge cannot rewrite it (docs/FORMAT.md, "What check verifies").
func (c *Checker) packFile(ctx context.Context, store objstore.Store, v catalog.Version) (packCheck, error) {
	if v.PackKey == "" || v.PackFile == nil {
		return packCheck{size: -1}, nil
	}
	if f, ok := c.packs[v.PackKey]; ok {
		return f, nil
	}
	row, err := c.opt.Cat.PackFileByID(ctx, *v.PackFile)
	if err != nil {
		return packCheck{}, fmt.Errorf("check: %w", err)
	}
	info, err := store.Stat(ctx, v.PackKey)
	f := packCheck{size: info.Size}
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		f.size = -1
	case err != nil:
		return packCheck{}, fmt.Errorf("check: %w", err)
	case info.Size != row.Bytes:
		c.wrongLength = append(c.wrongLength, fmt.Sprintf("the pack file %s holds %d bytes, and the catalog recorded %d: its versions are listed as damaged, and a purge of any of its rows fails until the file is whole again; put the file back from a copy of the bucket", v.PackKey, info.Size, row.Bytes))
	default:
		f.whole = true
	}
	c.packs[v.PackKey] = f
	return f, nil
}

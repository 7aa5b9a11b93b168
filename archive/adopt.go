package archive

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/parquetstore"
)

// A catalog put back from an older copy (a backup --to file) names pack
// files that purges and merges have since replaced, and objects that pack
// runs have since deleted; the bytes of its versions are in files it does
// not name. Start-up recovery finds them (docs/FORMAT.md, "Restore").

const msgAdopted = "start-up recovery adopted pack files a restored catalog did not name"

// errStopList ends a listing early.
var errStopList = errors.New("stop listing")

// behindBucket reports whether the bucket holds a manifest of tenant newer
// than any the catalog recorded: the catalog is older than the bucket.
// Manifests are few, so this is one short listing per tenant.
func (a *Archive) behindBucket(ctx context.Context, tenant ids.ID) (bool, error) {
	ms, err := a.Cat.Manifests(ctx, tenant)
	if err != nil {
		return false, err
	}
	var have int64
	if len(ms) > 0 {
		have = ms[len(ms)-1].Seq
	}
	behind := false
	err = a.Objects.List(ctx, kindPrefix(catalog.InS3, kindManifest, tenant), func(info objstore.Info) error {
		if n, ok := manifestSeq(tenant, info.Key); ok && n > have {
			behind = true
			return errStopList
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopList) {
		return false, wrapf("recovery: list manifests", err)
	}
	return behind, nil
}

// adoptRestored adopts, for every tenant whose catalog is behind the
// bucket, the pack files that hold the bytes of versions whose row names
// a file or an object that is gone. It runs after the tombstones destroyed
// the keys of versions purged since the copy, and before the purges
// finish and pending files are removed, since a file pending in the copy
// may be the one that now holds its rows.
func (a *Archive) adoptRestored(ctx context.Context, restored bool) (files, versions int, err error) {
	p := a.packer
	if p == nil {
		return 0, 0, nil
	}
	tenants, err := a.Cat.Tenants(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, t := range tenants {
		behind := restored
		if !behind {
			if behind, err = a.behindBucket(ctx, t.ID); err != nil {
				return files, versions, err
			}
		}
		if !behind {
			continue
		}
		f, v, err := p.adopt(ctx, t.ID)
		files += f
		versions += v
		if err != nil {
			return files, versions, err
		}
	}
	if files > 0 {
		p.log(slog.LevelInfo, msgAdopted, "files", files, "versions", versions)
	}
	return files, versions, nil
}

// adopt re-points the tenant's versions whose bytes are not where their
// rows say to the pack files the bucket holds them in, and forgets the
// rows of files that are gone and name nothing any more.
func (p *Packer) adopt(ctx context.Context, tenant ids.ID) (files, versions int, err error) {
	unlock, err := p.lock(ctx, tenant)
	if err != nil {
		return 0, 0, err
	}
	defer unlock()
	a := p.a
	inBucket := map[string]int64{}
	err = a.Objects.List(ctx, kindPrefix(catalog.InS3, kindParquet, tenant), func(info objstore.Info) error {
		inBucket[info.Key] = info.Size
		return nil
	})
	if err != nil {
		return 0, 0, wrapf("recovery: list pack files", err)
	}
	objects := map[ids.ID]bool{}
	err = a.Objects.List(ctx, kindPrefix(catalog.InS3, kindObjects, tenant), func(info objstore.Info) error {
		if id, ok := versionOf(info.Key); ok {
			objects[id] = true
		}
		return nil
	})
	if err != nil {
		return 0, 0, wrapf("recovery: list objects", err)
	}
	known, err := a.Cat.PackFiles(ctx, tenant)
	if err != nil {
		return 0, 0, err
	}
	named := map[string]catalog.PackFile{}
	gone := map[ids.ID]catalog.PackState{}
	for _, f := range known {
		named[f.Key] = f
		if _, ok := inBucket[f.Key]; !ok {
			gone[f.ID] = f.State
		}
	}
	lacking := map[ids.ID]bool{}
	err = a.Cat.EachKept(ctx, tenant, func(v catalog.Version) error {
		switch {
		case v.Location == catalog.Packed && (v.PackFile == nil || gone[*v.PackFile] != ""):
			lacking[v.ID] = true
		case v.Location == catalog.InS3 && !objects[v.ID]:
			lacking[v.ID] = true
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}

	keys := make([]string, 0, len(inBucket))
	for key := range inBucket {
		if f, ok := named[key]; !ok || f.State == catalog.PackPending {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys) // by date, then by the time each file was made
	for _, key := range keys {
		if len(lacking) == 0 {
			break
		}
		date, id, ok := packFileOf(tenant, key)
		if !ok {
			continue // not a name this server makes; check reports it
		}
		rows, total, err := p.rowsFor(ctx, key, inBucket[key], lacking)
		if err != nil {
			return files, versions, err
		}
		if len(rows) == 0 {
			continue
		}
		f := catalog.PackFile{ID: id, Tenant: tenant, Date: date, Key: key, Bytes: inBucket[key], Rows: total}
		var moved int
		err = a.Cat.Update(ctx, func(tx *catalog.Tx) error {
			moved, err = tx.AdoptPackFile(f, rows)
			return err
		})
		if err != nil {
			return files, versions, wrapf("recovery: adopt a pack file", err)
		}
		for _, r := range rows {
			delete(lacking, r.Version)
		}
		files++
		versions += moved
	}
	for id, state := range gone {
		err := a.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.ForgetPackFile(id, state) })
		if err != nil && !errors.Is(err, catalog.ErrChanged) {
			return files, versions, err
		}
	}
	return files, versions, nil
}

// rowsFor reads the pack file key (size bytes) and returns where it holds
// each version of want, and how many rows it has in all.
func (p *Packer) rowsFor(ctx context.Context, key string, size int64, want map[ids.ID]bool) ([]catalog.MovedRow, int64, error) {
	src, err := p.download(ctx, catalog.PackFile{Key: key, Bytes: size})
	if err != nil {
		return nil, 0, err
	}
	defer src.release()
	var rows []catalog.MovedRow
	var total int64
	err = parquetstore.ReadPackRows(src.file, size, func(version ids.ID, _ time.Time, loc parquetstore.Location) error {
		total++
		if want[version] {
			rows = append(rows, catalog.MovedRow{Version: version, Offset: loc.Offset, Length: loc.Length})
		}
		return nil
	})
	if err != nil {
		// A file that is not a pack file is no one's copy: check reports it.
		p.a.logError("start-up recovery: read a pack file no catalog row names", err)
		return nil, total, nil
	}
	return rows, total, nil
}

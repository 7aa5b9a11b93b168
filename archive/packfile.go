package archive

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/parquetstore"
	"github.com/vcon-server/vcon-server/seal"
)

// sealedFor reports whether b starts with the sealed header of version.
func sealedFor(b []byte, version ids.ID) bool {
	v, err := seal.HeaderVersion(bytes.NewReader(b))
	return err == nil && ids.ID(v) == version
}

// fileWriter is a new pack file: recorded pending, then written through an
// upload that spools it locally, then PUT create-only.
type fileWriter struct {
	p         *Packer
	f         catalog.PackFile
	up        objstore.Upload
	buf       *bufio.Writer
	pw        *parquetstore.PackWriter
	put       bool // the PUT succeeded, or may have: the object is ours
	committed bool // the catalog names it: never discard it
}

// createFile records a new file pending before anything is written to the
// bucket (docs/FORMAT.md, "Pack run" step 2): a crash after its PUT leaves
// a row naming it, and start-up recovery deletes it.
func (p *Packer) createFile(ctx context.Context, tenant ids.ID, date string, rows int) (*fileWriter, error) {
	a := p.a
	f := catalog.PackFile{ID: ids.NewV7(a.now()), Tenant: tenant, Date: date, Rows: int64(rows)}
	f.Key = PackKey(tenant, date, f.ID)
	if err := a.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.AddPendingPack(f) }); err != nil {
		return nil, wrapf("pack: record a new file", err)
	}
	fw := &fileWriter{p: p, f: f}
	// The replica, too, holds the pending row before the bucket holds the
	// file: a catalog restored from it names every file a run left, for
	// start-up recovery to adopt or delete. Without the row the file would
	// be named by nothing, and kept forever as a backup's possible copy.
	if a.Replica != nil {
		if err := a.Replica.Sync(ctx); err != nil {
			fw.discard()
			return nil, wrapf("pack: the catalog's replica did not take a new file's record", err)
		}
	}
	up, err := a.Objects.Upload(ctx, f.Key, true)
	if err != nil {
		fw.discard()
		return nil, wrapf("pack: start a new file", err)
	}
	fw.up = up
	fw.buf = bufio.NewWriterSize(up, 1<<20)
	fw.pw = parquetstore.NewPackWriter(fw.buf)
	return fw, nil
}

func (fw *fileWriter) write(r parquetstore.PackRow) error { return fw.pw.Write(r) }

// close ends the file and PUTs it create-only. With no row written it
// PUTs nothing and returns no location.
func (fw *fileWriter) close() ([]parquetstore.Location, int64, error) {
	locs, size, err := fw.pw.Close()
	if err != nil {
		return nil, 0, err
	}
	if len(locs) == 0 {
		return nil, 0, nil
	}
	if err := fw.buf.Flush(); err != nil {
		return nil, 0, wrapf("pack: spool a new file", err)
	}
	if err := fw.up.Commit(); err != nil {
		if errors.Is(err, objstore.ErrExists) {
			return nil, 0, ErrNameTaken
		}
		// The PUT may have taken effect with its answer lost: the name is
		// fresh, so whatever is there is ours to delete.
		fw.put = true
		return nil, 0, wrapf("pack: put a new file", err)
	}
	fw.put = true
	return locs, size, nil
}

// discard removes an uncommitted file: its object (only when this process
// PUT it: a name found taken belongs to another writer), then its pending
// row. When the delete fails the row stays, for start-up recovery.
func (fw *fileWriter) discard() {
	if fw.committed {
		return
	}
	a := fw.p.a
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if fw.up != nil {
		fw.up.Abort()
	}
	if fw.put {
		if err := a.Objects.Delete(ctx, fw.f.Key); err != nil {
			a.logError("pack: delete an abandoned file", err)
			return
		}
	}
	id := fw.f.ID
	if err := a.Cat.Update(ctx, func(tx *catalog.Tx) error { return tx.RemovePendingPack(id) }); err != nil {
		a.logError("pack: forget an abandoned file", err)
	}
	fw.committed = true // discarded: nothing more to do
}

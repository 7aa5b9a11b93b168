package cli

import (
	"flag"
	"fmt"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/objstore"
)

func init() {
	register(&command{
		name:    "storage move-objects",
		summary: "move every object of the data directory into the bucket of [storage.s3], server stopped; resumable",
		run:     runMoveObjects,
	})
}

// runMoveObjects moves the data directory's objects into the bucket that
// [storage.s3] names, once the bucket is vetted and bound to this catalog.
func runMoveObjects(e *env, _ *flag.FlagSet, _ []string) error {
	cfg, mk, cat, release, err := e.offline("vcon-server storage move-objects")
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
	bucket, err := openBucket(cfg)
	if err != nil {
		return err
	}
	if err := vetBucket(e.ctx, bucket, cfg.Storage.S3, cfg.Storage.Parquet != nil); err != nil {
		return err
	}
	if err := archive.Bind(e.ctx, bucket, cat.ID); err != nil {
		return err
	}
	a, err := archive.New(archive.Config{Cat: cat, Objects: bucket, Loc: catalog.InS3, Key: mk, MaxSize: cfg.MaxVconSize})
	if err != nil {
		return err
	}
	prog, err := newProgress(e.stderr, "storage move-objects", "objects moved", true, func() (int, error) { return cat.CountAt(e.ctx, catalog.InDir) })
	if err != nil {
		return err
	}
	st, err := a.MoveObjects(e.ctx, dir, prog.add)
	prog.done()
	if err != nil {
		return err
	}
	return e.emit(map[string]any{"to": bucket.String(), "moved": st.Moved, "bytes": st.Bytes, "tombstones": st.Tombstones, "leftovers_removed": st.Leftovers})
}

package diskspace

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/vcon-server/vcon-server/internal/reserve"
	"github.com/vcon-server/vcon-server/objstore"
)

// Spare wraps s so that the writes of the keys spare names (a purge's
// tombstones and count: docs/FORMAT.md, "Purge of an object", writes them
// before it deletes any bytes) are written again, once, after the reserve
// of dir is given back when the disk refused them for space. Every other
// key passes through: a store never takes the reserve.
func Spare(s objstore.Store, dir string, spare func(key string) bool) objstore.Store {
	return &spareStore{Store: s, dir: dir, spare: spare}
}

type spareStore struct {
	objstore.Store
	dir   string
	spare func(string) bool
}

// maxSpared bounds what a spared upload holds in memory: its keys are
// empty files and one short line.
const maxSpared = 64 << 10

var errTooLarge = errors.New("diskspace: a spared write is larger than 64 KiB")

func (s *spareStore) Upload(ctx context.Context, key string, createOnly bool) (objstore.Upload, error) {
	if !s.spare(key) {
		return s.Store.Upload(ctx, key, createOnly)
	}
	return &spareUpload{s: s, ctx: ctx, key: key, createOnly: createOnly}, nil
}

// spareUpload holds the bytes until Commit, so a write refused for space
// can be sent again whole.
type spareUpload struct {
	s          *spareStore
	ctx        context.Context
	key        string
	createOnly bool
	buf        bytes.Buffer
}

func (u *spareUpload) Write(p []byte) (int, error) {
	if u.buf.Len()+len(p) > maxSpared {
		return 0, errTooLarge
	}
	return u.buf.Write(p)
}

func (u *spareUpload) Commit() error {
	put := func() error {
		return objstore.Put(u.ctx, u.s.Store, u.key, bytes.NewReader(u.buf.Bytes()), u.createOnly)
	}
	err := put()
	if reserve.IsFull(err) {
		if _, rerr := reserve.Release(u.s.dir); rerr == nil {
			err = put()
		}
	}
	return err
}

func (u *spareUpload) Abort() {}

// RemoveStaleTemps passes the data directory's clean-up of killed writes'
// temporary files through (archive.Look looks for it, as objstore.Metered passes it on).
func (s *spareStore) RemoveStaleTemps(olderThan time.Duration) (int, error) {
	if d, ok := s.Store.(interface {
		RemoveStaleTemps(time.Duration) (int, error)
	}); ok {
		return d.RemoveStaleTemps(olderThan)
	}
	return 0, nil
}

// DeleteMany passes batch deletes through (objstore.DeleteMany looks for
// it), as RemoveStaleTemps is: a delete never needs the reserve.
func (s *spareStore) DeleteMany(ctx context.Context, keys []string) ([]string, error) {
	return objstore.DeleteMany(ctx, s.Store, keys)
}

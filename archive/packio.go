package archive

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/objstore"
)

const (
	fetchBudget   = 64 << 20 // sealed bytes fetched ahead of the writer
	maxFetchAhead = 16
)

// fetchInOrder reads the objects keys[i] a few at a time ahead of fn, which
// gets them in order, one at a time; no more than fetchBudget sealed bytes
// (at least one object) are held at once. An error from fn stops it.
func (p *Packer) fetchInOrder(ctx context.Context, keys []string, fn func(i int, b []byte, err error) error) error {
	type result struct {
		b   []byte
		err error
	}
	ahead := int(min(int64(maxFetchAhead), max(1, fetchBudget/p.opt.PackLimit)))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queue := make(chan chan result, ahead-1)
	go func() {
		defer close(queue)
		for _, key := range keys {
			ch := make(chan result, 1)
			select {
			case queue <- ch:
			case <-ctx.Done():
				return
			}
			go func() {
				b, err := p.readObject(ctx, key)
				ch <- result{b, err}
			}()
		}
	}()
	i := 0
	var ferr error
	for ch := range queue {
		r := <-ch
		if ferr == nil {
			if ferr = fn(i, r.b, r.err); ferr != nil {
				cancel()
			}
		}
		i++
	}
	if ferr == nil && i < len(keys) {
		ferr = ctx.Err()
	}
	return ferr
}

// readObject reads a whole object of at most the pack limit.
func (p *Packer) readObject(ctx context.Context, key string) ([]byte, error) {
	rc, err := p.a.Objects.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, p.opt.PackLimit+1))
}

// deleteAll deletes the keys, in batches where the store has them
// (objstore.DeleteMany), and returns those whose delete failed.
func (p *Packer) deleteAll(ctx context.Context, keys []string) []string {
	failed, _ := objstore.DeleteMany(ctx, p.a.Objects, keys)
	return failed
}

type spooled struct {
	f    catalog.PackFile
	file *os.File
}

// download copies a pack file into the spool, checking its size against
// the catalog's. The caller removes it with release.
func (p *Packer) download(ctx context.Context, f catalog.PackFile) (*spooled, error) {
	tmp, err := os.CreateTemp(p.opt.SpoolDir, spoolPrefix+"*.parquet")
	if err != nil {
		return nil, fmt.Errorf("pack: spool: %w", err)
	}
	s := &spooled{f: f, file: tmp}
	rc, err := p.a.Objects.Get(ctx, f.Key)
	if err != nil {
		s.release()
		return nil, wrapf("pack: read a pack file", err)
	}
	n, err := io.Copy(tmp, rc)
	rc.Close()
	if err != nil {
		s.release()
		return nil, wrapf("pack: read a pack file", err)
	}
	if n != f.Bytes {
		s.release()
		return nil, fmt.Errorf("pack: a pack file holds %d bytes, the catalog records %d: %w", n, f.Bytes, ErrDamaged)
	}
	return s, nil
}

func (s *spooled) release() {
	s.file.Close()
	os.Remove(s.file.Name())
}

package archive

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/vcon-server/vcon-server/objstore"
)

// Storage keeps a count of purges beside the tombstones (PurgeCountKey):
// before a purge writes a tombstone, the count in storage is raised to the
// catalog's, which the purge's key transaction raised. So every tombstone
// in storage is of a purge counted there, and a catalog whose count is
// below storage's was restored from a copy older than some purge
// (docs/FORMAT.md, "Purge of an object", "Restore").

// storedPurges is storage's purge count as this process last read or
// wrote it. Only serve writes it, under mu, so it never goes down.
type storedPurges struct {
	mu   sync.Mutex
	n    int64
	read bool
}

func (s *storedPurges) set(n int64) {
	s.mu.Lock()
	s.n, s.read = max(n, 0), true
	s.mu.Unlock()
}

// readPurgeCount reads storage's purge count: 0 when it has none. ok is
// false when what it holds is not a count: nothing can then be told from
// it.
func (a *Archive) readPurgeCount(ctx context.Context) (n int64, ok bool, err error) {
	n, ok, err = readCount(ctx, a.Objects)
	if err == nil && !ok {
		a.logError("start-up recovery: the purge count in storage is not a count", errors.New("every tombstone is read"))
	}
	return n, ok, err
}

// readCount reads the purge count of the store s: -1 when it has none.
func readCount(ctx context.Context, s objstore.Store) (n int64, ok bool, err error) {
	rc, err := s.Get(ctx, PurgeCountKey)
	if errors.Is(err, objstore.ErrNotFound) {
		return -1, true, nil
	}
	if err != nil {
		return 0, false, wrapf("read the purge count", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 64))
	if err != nil {
		return 0, false, wrapf("read the purge count", err)
	}
	n, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return 0, false, nil
	}
	return n, true, nil
}

// writeCount writes n as the purge count of the store s.
func writeCount(ctx context.Context, s objstore.Store, n int64) error {
	return objstore.Put(ctx, s, PurgeCountKey, strings.NewReader(strconv.FormatInt(n, 10)+"\n"), false)
}

// raisePurgeCount makes storage's purge count at least the catalog's. A
// purge calls it after its key transaction and before its tombstones.
func (a *Archive) raisePurgeCount(ctx context.Context) error {
	s := &a.rec.purges
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.read {
		n, _, err := a.readPurgeCount(ctx)
		if err != nil {
			return wrapf("purge", err)
		}
		s.n, s.read = max(n, 0), true
	}
	n, _, err := a.Cat.PurgeCount(ctx)
	if err != nil {
		return err
	}
	if n <= s.n {
		return nil
	}
	if err := writeCount(ctx, a.Objects, n); err != nil {
		return wrapf("purge: write the purge count", err)
	}
	s.n = n
	return nil
}

package objstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/vcon-server/vcon-server/internal/s3sig"
)

const (
	// deleteWorkers is how many single deletes run at once where a store
	// has no batch delete.
	deleteWorkers = 16
	// batchWorkers is how many DeleteObjects calls of 1,000 keys run at
	// once: a few keep the bucket busy without flooding it.
	batchWorkers = 4
)

// DeleteMany deletes keys from s: in batches where s is a ManyDeleter,
// else one Delete per key, several at once. It returns the keys it could
// not delete and the first error; failed is empty when err is nil.
func DeleteMany(ctx context.Context, s Store, keys []string) (failed []string, err error) {
	if len(keys) == 0 {
		return nil, nil
	}
	if m, ok := s.(ManyDeleter); ok {
		return m.DeleteMany(ctx, keys)
	}
	return deleteEach(ctx, s, keys)
}

// failures collects the keys that were not deleted, from many goroutines.
type failures struct {
	mu    sync.Mutex
	keys  []string
	first error
}

func (f *failures) add(err error, keys ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = append(f.keys, keys...)
	if f.first == nil {
		f.first = err
	}
}

func (f *failures) result() ([]string, error) { return f.keys, f.first }

// deleteEach deletes the keys one Delete each, deleteWorkers at once.
func deleteEach(ctx context.Context, s Store, keys []string) ([]string, error) {
	var f failures
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(deleteWorkers, len(keys)) {
		wg.Go(func() {
			for key := range work {
				if err := s.Delete(ctx, key); err != nil {
					f.add(err, key)
				}
			}
		})
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	return f.result()
}

// DeleteMany deletes the keys with DeleteObjects, 1,000 a call. A key the
// answer reports as not deleted is tried once more with a single DELETE
// (which has its retries, as the batch call had). A server that refuses
// the call itself is remembered for the life of the process, and every
// later call goes key by key without asking it again.
func (s *S3) DeleteMany(ctx context.Context, keys []string) ([]string, error) {
	if s.batchRefused.Load() {
		return deleteEach(ctx, s, keys)
	}
	var f failures
	full := make([]string, 0, len(keys))
	for _, k := range keys {
		fk, err := s.key(k)
		if err != nil {
			f.add(err, k)
			continue
		}
		full = append(full, fk)
	}
	sem := make(chan struct{}, batchWorkers)
	var wg sync.WaitGroup
	for len(full) > 0 {
		chunk := full[:min(len(full), s3sig.MaxDeleteKeys)]
		full = full[len(chunk):]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if failed, err := s.deleteChunk(ctx, chunk); len(failed) > 0 {
				f.add(err, failed...)
			}
		})
	}
	wg.Wait()
	return f.result()
}

// deleteChunk deletes up to 1,000 full keys with one call; it returns the
// store keys not deleted.
func (s *S3) deleteChunk(ctx context.Context, full []string) ([]string, error) {
	strip := func(fk string) string { return strings.TrimPrefix(fk, s.prefix) }
	if s.batchRefused.Load() {
		return s.deleteFull(ctx, full, strip)
	}
	errs, err := s.c.DeleteObjects(ctx, s.bucket, full)
	if errors.Is(err, s3sig.ErrBatchRefused) {
		s.batchRefused.Store(true)
		return s.deleteFull(ctx, full, strip)
	}
	if err != nil {
		keys := make([]string, len(full))
		for i, fk := range full {
			keys[i] = strip(fk)
		}
		return keys, err
	}
	if len(errs) == 0 {
		return nil, nil
	}
	again := make([]string, len(errs))
	for i, e := range errs {
		again[i] = e.Key
	}
	failed, err := s.deleteFull(ctx, again, strip)
	if err != nil {
		// The batch's own word on the first key is the better reason.
		err = fmt.Errorf("s3: delete objects: %s %s; then %w", errs[0].Code, errs[0].Message, err)
	}
	return failed, err
}

// deleteFull deletes full keys one by one (several at once).
func (s *S3) deleteFull(ctx context.Context, full []string, strip func(string) string) ([]string, error) {
	keys := make([]string, len(full))
	for i, fk := range full {
		keys[i] = strip(fk)
	}
	return deleteEach(ctx, s, keys)
}

// BatchDeletesRefused reports whether the server refused DeleteObjects, so
// that this store deletes key by key (for operators and tests).
func (s *S3) BatchDeletesRefused() bool { return s.batchRefused.Load() }

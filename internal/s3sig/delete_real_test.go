package s3sig_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vcon-server/vcon-server/internal/s3sig"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
)

// TestDeleteObjects deletes a full call of keys, odd ones among them and
// some that never existed, on each real server.
func TestDeleteObjects(t *testing.T) {
	s3test.ForEach(t, func(t *testing.T, srv *s3test.Server) {
		ctx := ctxT(t)
		c := srv.Client(t)
		bucket := srv.NewBucket(t, false)
		odd := []string{"tenants/a b/c", "tenants/a&b/c=d", "tenants/ü/日本語", "tenants/%2F/%41", "tenants/a<b>/'q\""}
		var keys []string
		for i := 0; len(keys) < s3sig.MaxDeleteKeys; i++ {
			switch {
			case i < len(odd):
				keys = append(keys, odd[i])
			case i%3 == 0:
				// Never written: a missing key is a delete done.
				keys = append(keys, fmt.Sprintf("missing/%04d", i))
			default:
				keys = append(keys, fmt.Sprintf("objects/t/%04d", i))
			}
		}
		sem := make(chan struct{}, 16)
		var wg sync.WaitGroup
		var failures atomic.Int64
		for _, k := range keys {
			if strings.HasPrefix(k, "missing/") {
				continue
			}
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if _, err := c.PutObject(ctx, bucket, k, strings.NewReader("x"), 1, s3sig.PutOptions{}); err != nil {
					failures.Add(1)
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if failures.Load() > 0 {
			t.FailNow()
		}
		keep := "objects/keep"
		if _, err := c.PutObject(ctx, bucket, keep, strings.NewReader("k"), 1, s3sig.PutOptions{}); err != nil {
			t.Fatal(err)
		}

		failed, err := c.DeleteObjects(ctx, bucket, keys)
		if err != nil || len(failed) != 0 {
			t.Fatalf("delete objects: %+v %v", failed, err)
		}
		var left []string
		if err := c.ListAll(ctx, bucket, "", func(o s3sig.Object) error {
			left = append(left, o.Key)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(left) != 1 || left[0] != keep {
			t.Errorf("left after the delete: %q, want only %q", left, keep)
		}
		for _, k := range odd {
			if _, err := c.HeadObject(ctx, bucket, k); !errors.Is(err, s3sig.ErrNotFound) {
				t.Errorf("head of a deleted odd key: %v", err)
			}
		}
		// Again: every key is missing now, and that is no failure.
		if failed, err := c.DeleteObjects(ctx, bucket, keys[:10]); err != nil || len(failed) != 0 {
			t.Errorf("delete of missing keys: %+v %v", failed, err)
		}
	})
}

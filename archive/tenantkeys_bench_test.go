package archive_test

import (
	"context"
	"testing"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/test/kit/archivetest"
)

// BenchmarkTenantKey is what every store, read and search pays for its
// tenant's key once it is unwrapped (kms.key_cache): a lookup, never a
// call to a key service, 8 goroutines at once.
func BenchmarkTenantKey(b *testing.B) {
	k := archivetest.Keyed(b, nil)
	a, err := archive.New(archive.Config{Cat: k.Cat, Key: k.Key})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := a.TenantKey(ctx, k.Tenant); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := a.TenantKey(ctx, k.Tenant); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

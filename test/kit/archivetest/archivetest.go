// Package archivetest makes what a test of the archive, or of a part that
// works beside it, needs before its first store: a master key, a catalog
// made with it in a fresh data directory, a tenant, and an Archive over
// them made with archive.New, as the server makes its own.
//
// It imports archive, so archive's tests use it from package archive_test;
// a package that archive does not import (replica, webhook) may use it in
// its own tests too.
package archivetest

import (
	"bytes"
	"context"
	"testing"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/seal"
)

// Kit is a data directory with its catalog, the master key the catalog
// was made with and, once NewTenant ran, a tenant.
type Kit struct {
	Dir    string
	Key    *seal.MasterKey
	Cat    *catalog.Catalog
	Tenant ids.ID
}

// MasterKey is the master key of 32 bytes of seed: tests that need a
// second key, one that opens nothing of the first, take another seed.
func MasterKey(tb testing.TB, seed byte) *seal.MasterKey {
	tb.Helper()
	mk, err := seal.MasterKeyFromBytes(bytes.Repeat([]byte{seed}, seal.KeySize))
	if err != nil {
		tb.Fatal(err)
	}
	return mk
}

// Make creates the catalog of key in dir, which exists, for fixtures that
// outlive one test (a benchmark's, made once); the caller closes Cat.
func Make(ctx context.Context, dir string, key *seal.MasterKey) (*Kit, error) {
	cat, _, err := catalog.Create(ctx, dir, key.CheckValue())
	if err != nil {
		return nil, err
	}
	return &Kit{Dir: dir, Key: key, Cat: cat}, nil
}

// Keyed makes a Kit in a new temporary folder with key (nil: the key of
// seed 7), its catalog closed when the test ends; no tenant yet.
func Keyed(tb testing.TB, key *seal.MasterKey) *Kit {
	tb.Helper()
	if key == nil {
		key = MasterKey(tb, 7)
	}
	k, err := Make(context.Background(), tb.TempDir(), key)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { k.Cat.Close() })
	return k
}

// New is Keyed with the key of seed 7 and a tenant, "acme".
func New(tb testing.TB) *Kit {
	tb.Helper()
	k := Keyed(tb, nil)
	k.NewTenant(tb, "acme")
	return k
}

// NewTenant adds a tenant, which becomes the kit's Tenant, and returns its
// id.
func (k *Kit) NewTenant(tb testing.TB, name string) ids.ID {
	tb.Helper()
	t, err := k.Cat.NewTenant(context.Background(), name, catalog.CLI)
	if err != nil {
		tb.Fatal(err)
	}
	k.Tenant = t.ID
	return t.ID
}

// Archive makes the Archive of c with archive.New, over the kit's catalog
// and key. A c without Objects stores in the data directory; MaxSize 0
// is 1 MiB.
func (k *Kit) Archive(tb testing.TB, c archive.Config) *archive.Archive {
	tb.Helper()
	c.Cat, c.Key = k.Cat, k.Key
	if c.Objects == nil {
		d, err := objstore.NewDir(k.Dir)
		if err != nil {
			tb.Fatal(err)
		}
		c.Objects, c.Loc = d, catalog.InDir
	}
	if c.MaxSize == 0 {
		c.MaxSize = 1 << 20
	}
	a, err := archive.New(c)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

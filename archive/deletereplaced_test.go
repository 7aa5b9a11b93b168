package archive_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
)

// TestZeroRetentionDeletePurgesReplacedVersions: a 0d DELETE purges the
// versions an earlier PUT hid too, not only the current one: when it
// returns, no version of the vCon is left, hidden or not, and no key
// (docs/retention-and-holds.md, "Purge at once: 0d"); a replica rolled
// over by that purge then holds none of them either.
func TestZeroRetentionDeletePurgesReplacedVersions(t *testing.T) {
	ctx := context.Background()
	a, _, tenant := newArchive(t)
	uuid := ids.NewRandom()
	for i, mode := range []catalog.StoreMode{catalog.CreateOnly, catalog.Replace, catalog.Replace} {
		body := apitest.NewVcon(uuid.String(), "version "+string(rune('a'+i)), "+15555550100")
		if _, err := a.Store(ctx, archive.StoreRequest{Tenant: tenant, Mode: mode, Body: bytes.NewReader(body), ContentType: "application/vcon"}); err != nil {
			t.Fatal(err)
		}
	}
	if vs, err := a.Cat.Versions(ctx, tenant, uuid); err != nil || len(vs) != 3 {
		t.Fatalf("versions before the DELETE: %d, %v", len(vs), err)
	}
	if err := a.Delete(ctx, tenant, uuid); err != nil {
		t.Fatal(err)
	}
	if vs, err := a.Cat.Versions(ctx, tenant, uuid); err != nil || len(vs) != 0 {
		t.Fatalf("%d version(s) left after a 0d DELETE (%v), want none", len(vs), err)
	}
	var left int
	if err := a.Cat.DB().QueryRow(`SELECT count(*) FROM versions WHERE uuid = ? AND wrapped_key IS NOT NULL`, uuid[:]).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d wrapped key(s) of the vCon left after a 0d DELETE", left)
	}
	if err := a.Delete(ctx, tenant, uuid); !errors.Is(err, archive.ErrNotFound) {
		t.Fatalf("a second DELETE: %v, want ErrNotFound", err)
	}
}

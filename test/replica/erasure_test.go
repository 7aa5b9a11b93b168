package replica

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/seal"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestErasureAndReplica: when an erasure answers, no object of the
// catalog's replica holds a key it destroyed (its purges waited for the
// rollover); a catalog restored from the replica keeps the erasure, its
// receipt, the signing key (the JWKS is the same) and the 410 of a store
// of the erased uuid.
func TestErasureAndReplica(t *testing.T) {
	ctx := context.Background()
	target := t.TempDir()
	e := testenv.New(t, testenv.Options{Storage: "[replica]\nto = \"" + target + "\"\nmax_lag = 0\n"})
	token := e.NewKey(e.Tenant("acme"), "write", "read", "delete").Token
	gone := ids.NewRandom().String()
	kept := ids.NewRandom().String()
	for _, s := range []struct{ method, path, u string }{{"POST", "/vcons", gone}, {"PUT", "/vcons/" + gone, gone}, {"POST", "/vcons", kept}} {
		if r := e.Do(s.method, s.path, token, apitest.NewVcon(s.u, s.method, "+15555550100"), "Content-Type", "application/vcon"); r.Status != 201 && r.Status != 200 {
			t.Fatalf("%s %s: %d %s", s.method, s.path, r.Status, r.Body)
		}
	}
	if err := e.Daemon.Replica.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	wrapped := wrappedKeys(t, e, gone)
	mk, err := seal.LoadMasterKey(e.Config.MasterKey)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := objstore.NewDir(target)
	if err != nil {
		t.Fatal(err)
	}
	holding := 0
	for _, k := range keys(t, dir, "replica/") {
		if holdsAny(t, dir, mk, k, wrapped) {
			holding++
		}
	}
	if len(wrapped) != 2 || holding == 0 {
		t.Fatalf("%d keys, held by %d replica objects before the erasure: the test proves nothing", len(wrapped), holding)
	}
	r := e.Do("POST", "/erasures", token, []byte(`{"uuids":["`+gone+`"]}`), "Content-Type", "application/json")
	if r.Status != 200 {
		t.Fatalf("POST /erasures: %d %s", r.Status, r.Body)
	}
	for _, k := range keys(t, dir, "replica/") {
		if holdsAny(t, dir, mk, k, wrapped) {
			t.Errorf("%s holds a key the erasure destroyed when it answered", k)
		}
	}
	var answer struct{ Erasure string }
	r.JSON(t, &answer)
	jwks := e.Do("GET", "/.well-known/jwks.json", "", nil).Body

	e.Stop()
	for _, f := range []string{"catalog.db", "catalog.db-wal", "catalog.db-shm"} {
		os.Remove(filepath.Join(e.Config.DataDir, f))
	}
	t.Logf("restore: %s", e.CLI("restore"))
	e.Start()
	if got := e.Do("GET", "/.well-known/jwks.json", "", nil).Body; !bytes.Equal(got, jwks) {
		t.Errorf("the JWKS after the restore is %s, want %s", got, jwks)
	}
	// The same answer, its record's proof aside: that is against the
	// newest checkpoint, which grows with the log.
	if again := e.Do("GET", "/erasures/"+answer.Erasure, token, nil); again.Status != 200 || !bytes.Equal(apitest.WithoutProof(t, again.Body), apitest.WithoutProof(t, r.Body)) {
		t.Errorf("GET /erasures/{id} after the restore: %d %s", again.Status, again.Body)
	}
	if got := e.Do("POST", "/vcons", token, apitest.NewVcon(gone, "again", "+15555550100"), "Content-Type", "application/vcon"); got.Status != 410 {
		t.Errorf("a store of the erased uuid after the restore: %d %s", got.Status, got.Body)
	}
	if got := e.Do("GET", "/vcons/"+kept, token, nil); got.Status != 200 {
		t.Errorf("GET %s after the restore: %d", kept, got.Status)
	}
}

// TestErasureNeverStoredReplica: an erasure of 10,000 uuids the tenant
// never stored leaves no row of them, so the replica grows by its one
// erasure row and receipt, not by megabytes (it grew by 1.7 MB when each
// uuid was a row).
func TestErasureNeverStoredReplica(t *testing.T) {
	ctx := context.Background()
	target := t.TempDir()
	e := testenv.New(t, testenv.Options{Storage: "[replica]\nto = \"" + target + "\"\nmax_lag = 0\n"})
	token := e.NewKey(e.Tenant("acme"), "delete").Token
	dir, err := objstore.NewDir(target)
	if err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		if err := e.Daemon.Replica.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := dir.List(ctx, "replica/", func(i objstore.Info) error { n += i.Size; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := size()
	uuids := make([]string, 10000)
	for i := range uuids {
		uuids[i] = ids.NewRandom().String()
	}
	r := e.Do("POST", "/erasures", token, []byte(`{"uuids":["`+strings.Join(uuids, `","`)+`"]}`), "Content-Type", "application/json")
	if r.Status != 200 || !bytes.Contains(r.Body, []byte(`"not_found":10000`)) {
		t.Fatalf("POST /erasures: %d %.300s", r.Status, r.Body)
	}
	grown := size() - before
	t.Logf("the replica grew by %d bytes", grown)
	if grown >= 100<<10 {
		t.Fatalf("the replica grew by %d bytes for 10,000 never-stored uuids, want less than 100 KB", grown)
	}
}

package replica

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/seal"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/replicaread"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestPurgeLeavesNothingInReplica is issue 14's second promise, on each S3
// server, with Parquet storage off and on, with max_lag 0 and 1, the
// tenant's retention set to 0d by the CLI while the server runs, and a
// uuid of two versions (the first hidden by a PUT): when its 0d DELETE
// answers, every
// replica object that existed before it is gone (Stat: not found), save
// shards the new generation kept, and none of those, nor any object of
// the new generation, holds a wrapped key of the purged versions (each
// object is opened with the master key, as FORMAT.md describes it). A
// restore afterwards, into a fresh data directory, keeps the uuid purged
// and reads every other vCon back.
func TestPurgeLeavesNothingInReplica(t *testing.T) {
	for _, kind := range s3test.Kinds {
		t.Run(kind, func(t *testing.T) {
			srv := s3test.Start(t, kind)
			for _, parquet := range []bool{false, true} {
				for _, lag := range []int{0, 1} {
					name := "objects"
					if parquet {
						name = "parquet"
					}
					t.Run(name+"/max_lag="+itoa(lag), func(t *testing.T) { purgeLeavesNothing(t, srv, parquet, lag) })
				}
			}
		})
	}
}

func purgeLeavesNothing(t *testing.T, srv *s3test.Server, parquet bool, lag int) {
	ctx := context.Background()
	storage := srv.StorageTOML(t, srv.NewBucket(t, false), "vcon/")
	if parquet {
		storage += "\n[storage.parquet]\npack_interval = 3600\n"
	}
	e := testenv.New(t, testenv.Options{Storage: storage + replicaTOML("s3", lag)})
	token := e.NewKey(e.Tenant("acme"), "write", "read", "delete").Token
	// Set by the CLI while the server runs: two processes write the
	// replica, each under its lock file.
	e.CLI("tenant", "set-retention", "acme", "0d")
	bodies := map[string][]byte{}
	store := func(method, u, subject string) {
		t.Helper()
		body := apitest.NewVcon(u, subject, "+15555550100")
		path := "/vcons"
		if method == "PUT" {
			path += "/" + u
		}
		if r := e.Do(method, path, token, body, "Content-Type", "application/vcon"); r.Status != 201 && r.Status != 200 {
			t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Body)
		}
		bodies[u] = body
	}
	gone := ids.NewRandom().String()
	store("POST", gone, "to be purged, first version")
	for i := range 10 {
		store("POST", ids.NewRandom().String(), "kept "+itoa(i))
	}
	store("PUT", gone, "to be purged, second version")
	if parquet {
		e.Daemon.PackRun(ctx) // the purge then rewrites a pack file
		for i := range 3 {
			store("POST", ids.NewRandom().String(), "kept, stored after the pack run "+itoa(i))
		}
	}
	if err := e.Daemon.Replica.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	wrapped := wrappedKeys(t, e, gone)
	if len(wrapped) != 2 {
		t.Fatalf("%d wrapped keys for the uuid to purge, want 1", len(wrapped))
	}
	mk, err := seal.LoadMasterKey(e.Config.MasterKey)
	if err != nil {
		t.Fatal(err)
	}
	s := e.Store()
	before := keys(t, s, "replica/")
	holding := 0
	for _, k := range before {
		if holdsAny(t, s, mk, k, wrapped) {
			holding++
		}
	}
	if holding == 0 {
		t.Fatalf("no replica object of %d holds the keys before the purge: the test proves nothing\n%s", len(before), strings.Join(before, "\n"))
	}

	if r := e.Do("DELETE", "/vcons/"+gone, token, nil); r.Status != 204 {
		t.Fatalf("DELETE: %d %s", r.Status, r.Body)
	}
	delete(bodies, gone)
	if r := e.Do("GET", "/vcons/"+gone+"/versions", token, nil); r.Status != 404 {
		t.Errorf("the purged uuid's versions after the 0d DELETE: %d %s, want 404: no version left, hidden or not", r.Status, r.Body)
	}
	kept := 0
	for _, k := range before {
		_, err := s.Stat(ctx, k)
		switch {
		case errors.Is(err, objstore.ErrNotFound):
		case err != nil:
			t.Fatalf("Stat %s: %v", k, err)
		case k == "replica/head":
			// Rewritten in place to name the new manifest (docs/FORMAT.md,
			// "Replica rollover", step 4); the check below reads it too.
		case !strings.Contains(k, "/shard-"):
			t.Errorf("%s existed before the 0d DELETE and is still there when it answered", k)
		default:
			kept++
		}
	}
	after := keys(t, s, "replica/")
	for _, k := range after {
		if holdsAny(t, s, mk, k, wrapped) {
			t.Errorf("%s holds a wrapped key of the purged uuid when the DELETE answered", k)
		}
	}
	t.Logf("%d replica objects before the DELETE, %d of them holding the keys; %d shards kept; %d objects after", len(before), holding, kept, len(after))

	// Lose the host now: a catalog restored from the replica into a fresh
	// data directory knows nothing of the purged uuid.
	e.Stop()
	if err := os.Rename(e.Config.DataDir, filepath.Join(t.TempDir(), "lost")); err != nil {
		t.Fatal(err)
	}
	t.Logf("restore: %s", e.CLI("restore"))
	for _, w := range wrappedKeys(t, e, gone) {
		if w != nil {
			t.Errorf("the restored catalog holds a wrapped key of the purged uuid")
		}
	}
	from := len(e.Log.String())
	e.Start()
	if r := e.Do("GET", "/vcons/"+gone, token, nil); r.Status != 404 {
		t.Errorf("the purged uuid reads %d after the restore", r.Status)
	}
	for u, body := range bodies {
		if r := e.Do("GET", "/vcons/"+u, token, nil); r.Status != 200 || !bytes.Equal(r.Body, body) {
			t.Errorf("GET %s after the restore: %d %s", u, r.Status, r.Body)
		}
	}
	if parquet {
		// The start's pack run packs the three stored after the first;
		// a stop that cuts it after its PUT leaves a file check names.
		e.WaitLog(from, "pack run")
	}
	e.Stop()
	checkDeep(t, e)
}

// wrappedKeys reads the wrapped data keys of uuid's versions from the
// catalog (nil for a destroyed one).
func wrappedKeys(t *testing.T, e *testenv.Env, uuid string) [][]byte {
	t.Helper()
	cat, err := catalog.Open(context.Background(), e.Config.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	u := ids.MustParse(uuid)
	rows, err := cat.DB().Query(`SELECT wrapped_key FROM versions WHERE uuid = ?`, u[:])
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var w []byte
		if err := rows.Scan(&w); err != nil {
			t.Fatal(err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// holdsAny opens the replica object under key with the master key (the
// head's every slot) and reports whether its body holds any of the byte
// strings in secrets.
func holdsAny(t *testing.T, s objstore.Store, mk *seal.MasterKey, key string, secrets [][]byte) bool {
	t.Helper()
	body := replicaread.Body(t, s, mk, key)
	for _, secret := range secrets {
		if len(secret) > 0 && bytes.Contains(body, secret) {
			return true
		}
	}
	return false
}

package tlog_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
	"github.com/vcon-server/vcon-server/test/kit/webhooktest"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
	_ "modernc.org/sqlite"
)

// bucketTiles is a tlog.TileReader over a bucket's copy of one log.
type bucketTiles struct {
	t   *testing.T
	s   objstore.Store
	dir string // logs/<tenant id>/
}

func (bucketTiles) Height() int { return 8 }
func (r bucketTiles) ReadTiles(ts []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(ts))
	for i, t := range ts {
		b, err := r.get("tile/" + strings.TrimPrefix(t.Path(), "tile/8/"))
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}
func (bucketTiles) SaveTiles([]tlog.Tile, [][]byte) {}

func (r bucketTiles) get(key string) ([]byte, error) {
	rc, err := r.s.Get(context.Background(), r.dir+key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// openNote verifies a checkpoint with x/mod's note under vkey.
func openNote(t *testing.T, vkey string, raw []byte) tlog.Tree {
	t.Helper()
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(raw, note.VerifierList(v))
	if err != nil {
		t.Fatalf("the checkpoint does not verify under %s: %v\n%s", vkey, err, raw)
	}
	tree, err := parseCheckpoint(n.Text)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// TestWitnesses: each new checkpoint of a tenant's log reaches its
// webhook receiver, and the bucket holds the checkpoint and the log's
// hash tiles in the tlog-tiles layout, which x/mod checks without the
// server: the tiles give the checkpoint's root, and a later copy is
// consistent with a checkpoint the receiver took earlier. The look at
// stored objects and check leave the copy alone. Then, with the server
// stopped, the newest record is deleted: audit verify names it, and once
// its leaf and the catalog's checkpoint are gone too (the catalog alone
// is consistent then) the checkpoint the receiver kept still refutes it.
func TestWitnesses(t *testing.T) {
	s3test.ForEach(t, func(t *testing.T, srv *s3test.Server) {
		storage := srv.StorageTOML(t, srv.NewBucket(t, false), "vcon/")
		witnesses(t, srv, storage, "vcon/")
	})
	t.Run("replica", func(t *testing.T) {
		srv := s3test.Start(t, "versitygw")
		toml := srv.StorageTOML(t, srv.NewBucket(t, false), "r/")
		toml = strings.Replace(toml, "[storage]\nobjects = \"s3\"\n\n[storage.s3]", "[replica]\nto = \"s3\"\nmax_lag = 0\n\n[replica.s3]", 1)
		witnesses(t, srv, toml, "r/")
	})
}

func witnesses(t *testing.T, srv *s3test.Server, storage, prefix string) {
	e := testenv.Prepare(t, testenv.Options{Storage: storage})
	e.WriteConfig(webhooktest.AllowLoopback + "\n[audit_log]\ncopy_interval = 1\n")
	e.Start()
	rcv := webhooktest.Start(t, t.TempDir())
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "audit")
	e.CLI("tenant", "set-webhook", "acme", rcv.URL, "--secret-file", rcv.SecretFile, "--ca-file", rcv.CAFile)
	bucket := strings.SplitN(strings.SplitN(storage, "bucket = \"", 2)[1], "\"", 2)[0]
	store := objstore.NewS3(srv.Client(t), bucket, prefix, t.TempDir())
	bt := bucketTiles{t, store, "logs/" + tenant + "/"}
	vkey := strings.TrimSpace(string(e.Do("GET", "/audit/log/key", k.Token, nil).Body))

	// put stores n vCons and waits until the receiver and the bucket hold
	// the checkpoint of every record; it returns that checkpoint.
	signed := 1 // the key's record at least
	put := func(n int) []byte {
		t.Helper()
		for range n {
			if r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(ids.NewRandom().String(), "w", "+15555550100"), "Content-Type", "application/vcon"); r.Status != 201 {
				t.Fatalf("POST /vcons: %d %s", r.Status, r.Body)
			}
		}
		var cp, got []byte
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			cp = e.Do("GET", "/audit/log/checkpoint", k.Token, nil).Body
			size, _ := strconv.Atoi(strings.Split(string(cp), "\n")[1])
			evs := rcv.Checkpoints()
			got, _ = bt.get("checkpoint")
			if len(evs) > 0 && evs[len(evs)-1].Data.Checkpoint == string(cp) && string(got) == string(cp) && size >= signed+n {
				signed = size
				ev := evs[len(evs)-1]
				if ev.Data.Tenant != tenant || ev.Data.Size != uint64(size) || ev.Data.Origin != strings.Split(string(cp), "\n")[0] {
					t.Fatalf("the audit.checkpoint event: %+v\nthe checkpoint:\n%s", ev.Data, cp)
				}
				return cp
			}
			if time.Now().After(deadline) {
				t.Fatalf("in 15 s the receiver took %d checkpoints, the bucket holds %q; the server's:\n%s", len(evs), got, cp)
			}
		}
	}
	first := put(300)
	before := openNote(t, vkey, first)
	// The bucket's tiles give the root the checkpoint signs (x/mod
	// checks each tile it reads against it).
	if h, err := tlog.TreeHash(before.N, tlog.TileHashReader(before, bt)); err != nil || h != before.Hash {
		t.Fatalf("the bucket's tiles give the root %v (%v), its checkpoint %v", h, err, before.Hash)
	}
	last := put(300)
	after := openNote(t, vkey, last)
	proof, err := tlog.ProveTree(after.N, before.N, tlog.TileHashReader(after, bt))
	if err != nil {
		t.Fatal(err)
	}
	if err := tlog.CheckTree(proof, after.N, after.Hash, before.N, before.Hash); err != nil {
		t.Fatalf("the bucket's copy of %d records is not consistent with the checkpoint of %d the receiver took: %v", after.N, before.N, err)
	}
	// Hashes only: never an entry bundle, nothing an outsider could read
	// a record from.
	var keys []string
	store.List(context.Background(), "logs/", func(i objstore.Info) error {
		keys = append(keys, i.Key)
		return nil
	})
	for _, k := range keys {
		if strings.Contains(k, "/entries/") {
			t.Errorf("the bucket holds an entry bundle: %s", k)
		}
	}
	e.Daemon.Look(context.Background())
	for _, k := range keys {
		if _, err := store.Stat(context.Background(), k); errors.Is(err, objstore.ErrNotFound) && !strings.Contains(k, ".p/") {
			t.Errorf("the look removed %s", k)
		}
	}
	e.Stop()
	if out, errOut, code := e.TryCLI("check"); code != 0 {
		t.Fatalf("check with the logs' copy in the bucket: exit %d %s%s", code, out, errOut)
	}

	saved := filepath.Join(t.TempDir(), "saved.txt")
	os.WriteFile(saved, last, 0o600)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(e.Config.DataDir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tid, _ := ids.Parse(tenant)
	var rows int64
	db.QueryRow(`SELECT count(*) FROM audit WHERE tenant = ?`, tid[:]).Scan(&rows)
	if rows != after.N {
		t.Fatalf("the tenant has %d records, its last checkpoint %d", rows, after.N)
	}
	verify := func(want int, says string, args ...string) {
		t.Helper()
		out, errOut, code := e.TryCLI(append([]string{"audit", "verify", "--tenant", "acme"}, args...)...)
		if code != want || !strings.Contains(out+errOut, says) {
			t.Errorf("audit verify %v: exit %d %s%s, want %d and %q", args, code, out, errOut, want, says)
		}
	}
	newest := strconv.FormatInt(after.N-1, 10)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`DELETE FROM audit WHERE id = (SELECT max(id) FROM audit WHERE tenant = ?)`, tid[:])
	verify(1, "record "+newest+" is missing", "--checkpoint", saved)
	// Its leaf and the catalog's checkpoint deleted too: the catalog
	// alone holds a log of one record less, consistent with itself.
	exec(`DELETE FROM log_nodes WHERE id = (SELECT num << 40 FROM logs WHERE log = ?) + ?`, tid[:], after.N-1)
	exec(`DELETE FROM log_checkpoints WHERE log = ?`, tid[:])
	verify(0, newest+" records")
	verify(1, "covers "+strconv.FormatInt(after.N, 10)+" records, the catalog holds "+newest+": record "+newest+" onwards is missing", "--checkpoint", saved)
}

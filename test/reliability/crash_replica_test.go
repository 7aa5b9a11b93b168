package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/cli"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/seal"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/replicaread"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// The replica's crash points (docs/FORMAT.md, "Replica", "Replica
// rollover") join the walk here, so the walk's table and this file's
// scenarios are edited apart.
func init() {
	for _, p := range []string{crashpoint.ReplicaAfterSegment, crashpoint.ReplicaAfterHead, crashpoint.ReplicaAfterPending, crashpoint.ReplicaAfterShards,
		crashpoint.ReplicaAfterManifest, crashpoint.ReplicaAfterNewHead, crashpoint.ReplicaAfterRecord, crashpoint.ReplicaAfterDeletes} {
		crashScenarios[p] = crashReplica
	}
}

// crashReplica kills the server at a step of the replica, with the
// replica in a directory beside a data directory and in the storage
// bucket: a segment is cut by a store (max_lag 0 holds its answer), a
// rollover by a 0d DELETE. After the restart every acknowledged vCon reads
// back, the purge ends with no replica object from before it left that the
// new generation does not keep (none holds the destroyed key), and a
// restore from the replica finds every acknowledged vCon and not the
// purged one.
func crashReplica(t *testing.T, c *crashEnv, point string) {
	for _, target := range []string{"dir", "s3"} {
		t.Run(target, func(t *testing.T) { crashReplicaOn(t, c, point, target == "s3") })
	}
	if !cutPoint(point) {
		t.Run("sweep", func(t *testing.T) { crashReplicaSweep(t, c, point) })
		t.Run("rotate", func(t *testing.T) { crashReplicaRotate(t, c, point) })
	}
}

// cutPoint reports whether point is a step of a segment's cut (a store
// reaches it), not of a rollover (a purge, a rotation).
func cutPoint(point string) bool {
	return point == crashpoint.ReplicaAfterSegment || point == crashpoint.ReplicaAfterHead
}

// carriedOn is the line of a restored catalog's first replica step.
const carriedOn = "replica: carrying on the restored generation"

// crashReplicaSweep kills serve's start-up recovery in the rollover of
// the purge sweep it runs before /health answers: a vCon hidden at 30d,
// then the tenant set to 0d. The next start finishes the purge.
func crashReplicaSweep(t *testing.T, c *crashEnv, point string) {
	r := newReplicaEnv(t, c, false, "1", "30d")
	e := r.Env
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read", "delete")
	a := acked{}
	p := e.StartBinary()
	storeSome(t, e, k.Token, 4, a)
	var victim string
	for u := range a {
		victim = u
		break
	}
	if got := e.Do("DELETE", "/vcons/"+victim, k.Token, nil); got.Status != 204 {
		t.Fatalf("DELETE: %d %s", got.Status, got.Body)
	}
	a[victim] = nil
	p.Stop()
	before := r.objects(t)
	secret := r.wrappedKey(t, victim)
	if secret == nil {
		t.Fatal("the hidden version's key is gone before its purge")
	}
	e.CLI("tenant", "set-retention", tenant, "0d")
	runKilled(t, e, point, "serve")
	p = e.StartBinary()
	verifyAcked(t, e, k.Token, a)
	p.Stop()
	checkDeep(t, e)
	r.assertForgotten(t, before, secret)
	r.loseCatalog(t)
	if out, errOut, code := e.TryCLI("restore"); code != 0 {
		t.Fatalf("restore: exit %d\n%s%s", code, out, errOut)
	}
	if n := r.keysOf(t, victim); n != 0 {
		t.Fatalf("the restored catalog holds %d key(s) of the purged vCon", n)
	}
	carried := strings.Count(readLog(t, e), carriedOn)
	p = e.StartBinary()
	verifyAcked(t, e, k.Token, a)
	waitLog(t, p, carriedOn, carried+1)
	p.Stop()
	checkDeep(t, e)
}

// crashReplicaRotate kills master-key rotate in the rollover that seals
// the replica under the new key: once the server runs on the new key, no
// object sealed under the old one remains, and a restore finds every
// acknowledged vCon.
func crashReplicaRotate(t *testing.T, c *crashEnv, point string) {
	r := newReplicaEnv(t, c, false, "0", "0d")
	e := r.Env
	k := e.NewKey(e.Tenant("acme"), "write", "read")
	a := acked{}
	p := e.StartBinary()
	storeSome(t, e, k.Token, 4, a)
	p.Stop()
	before := r.objects(t)
	newKey := filepath.Join(e.Dir, "new.key")
	if err := os.WriteFile(newKey, bytes.Repeat([]byte{7}, 32), 0o400); err != nil {
		t.Fatal(err)
	}
	log := readLog(t, e)
	runKilled(t, e, point, "master-key", "rotate", "--new", newKey)
	// The catalog is rotated: the operator puts the new key in place.
	if err := os.Remove(e.Config.MasterKey); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(newKey, e.Config.MasterKey); err != nil {
		t.Fatal(err)
	}
	p = e.StartBinary()
	verifyAcked(t, e, k.Token, a)
	// The start finishes the cut-off rollover: a whole generation when
	// its record still names the old key, else the deletes.
	repair := "replica: generation written"
	if point == crashpoint.ReplicaAfterRecord || point == crashpoint.ReplicaAfterDeletes {
		repair = "replica: finished the deletes of a rollover that was cut off"
	}
	waitLog(t, p, repair, strings.Count(log, repair)+1)
	p.Stop()
	checkDeep(t, e)
	// Every object opens under the new key (open fails on any other).
	r.assertForgotten(t, before, nil)
	r.loseCatalog(t)
	if out, errOut, code := e.TryCLI("restore"); code != 0 {
		t.Fatalf("restore: exit %d\n%s%s", code, out, errOut)
	}
	carried := strings.Count(readLog(t, e), carriedOn)
	p = e.StartBinary()
	verifyAcked(t, e, k.Token, a)
	waitLog(t, p, carriedOn, carried+1)
	p.Stop()
	checkDeep(t, e)
}

func crashReplicaOn(t *testing.T, c *crashEnv, point string, s3 bool) {
	r := newReplicaEnv(t, c, s3, "0", "0d")
	e := r.Env
	k := e.NewKey(e.Tenant("acme"), "write", "read", "delete")
	a := acked{}
	p := e.StartBinary()
	storeSome(t, e, k.Token, 4, a)
	p.Stop()
	var victim string
	for u := range a {
		victim = u
		break
	}
	before := r.objects(t)
	secret := r.wrappedKey(t, victim)
	if len(before) < 2 || secret == nil {
		t.Fatalf("before the kill: %d replica objects, victim's key %v", len(before), secret != nil)
	}

	var cutKey string // a key whose creation was killed while replicated
	if cutPoint(point) {
		// A CLI command returns once its change is replicated: killed
		// there, the change is committed and the next start replicates it.
		out := runKilledOutput(t, e, point, "key", "create", "--tenant", k.Tenant, "--label", "cut", "--scope", "read")
		var cut testenv.Key
		if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &cut); err != nil || cut.Token == "" {
			t.Fatalf("key create printed no key before the kill: %v\n%s", err, out)
		}
		cutKey = cut.Token
		// The server, killed at its first segment: the one a store cuts
		// before its answer, or the one that carries the start's own
		// changes, whichever comes first. The store is whole or absent.
		p = e.StartBinary(crashpoint.EnvVar + "=" + point)
		u := ids.NewRandom().String()
		body := apitest.NewVcon(u, "cut", "+15555550100")
		sendUntilDeath(t, e, p, point, "POST", "/vcons", k.Token, body)
		p = e.StartBinary()
		switch got := e.Do("GET", "/vcons/"+u, k.Token, nil); {
		case got.Status == 200 && bytes.Equal(got.Body, body):
			a[u] = body // in the catalog: the restart's replica must carry it
		case got.Status != 404:
			t.Fatalf("the store cut by the kill reads %d with %d bytes", got.Status, len(got.Body))
		}
		// A purge after the repair: its rollover leaves nothing older.
		before = r.objects(t)
		if got := e.Do("DELETE", "/vcons/"+victim, k.Token, nil); got.Status != 204 {
			t.Fatalf("DELETE after the restart: %d %s", got.Status, got.Body)
		}
	} else {
		// The DELETE destroyed the key, then its rollover was cut: the
		// next start finishes the purge, rolling the replica over again.
		p = e.StartBinary(crashpoint.EnvVar + "=" + point)
		sendUntilDeath(t, e, p, point, "DELETE", "/vcons/"+victim, k.Token, nil)
		p = e.StartBinary()
	}
	a[victim] = nil
	verifyAcked(t, e, k.Token, a)
	if t.Failed() {
		t.Fatalf("serve.log:\n%s", tail([]byte(readLog(t, e))))
	}
	readsWith(t, e, cutKey, a)
	p.Stop()
	checkDeep(t, e)
	r.assertForgotten(t, before, secret)

	// Lose the catalog (with the storage bucket, the whole data
	// directory), restore it from the replica, serve.
	r.loseCatalog(t)
	if out, errOut, code := e.TryCLI("restore"); code != 0 {
		t.Fatalf("restore: exit %d\n%s%s", code, out, errOut)
	}
	if n := r.keysOf(t, victim); n != 0 {
		t.Fatalf("the restored catalog holds %d key(s) of the purged vCon", n)
	}
	carried := strings.Count(readLog(t, e), carriedOn)
	p = e.StartBinary()
	verifyAcked(t, e, k.Token, a)
	// A restored catalog carries on the generation it was restored from.
	waitLog(t, p, carriedOn, carried+1)
	readsWith(t, e, cutKey, a)
	p.Stop()
	checkDeep(t, e)
}

func readLog(t *testing.T, e *testenv.Env) string {
	b, err := os.ReadFile(filepath.Join(e.Dir, "serve.log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func checkDeep(t *testing.T, e *testenv.Env) {
	t.Helper()
	if out, errOut, code := e.TryCLI("check", "--deep"); code != 0 || strings.Contains(out, `"damaged":["`) || strings.Contains(out, `"problems":["`) {
		log, _ := os.ReadFile(filepath.Join(e.Dir, "serve.log"))
		t.Fatalf("check --deep: exit %d\n%s%s\nserve.log:\n%s", code, out, errOut, tail(log))
	}
}

// replicaEnv is a server with a [replica]: in a directory of its own
// beside a data directory, or with to = "s3" in the storage bucket.
type replicaEnv struct {
	*testenv.Env
	s3 bool
}

func newReplicaEnv(t *testing.T, c *crashEnv, s3 bool, maxLag, retention string) *replicaEnv {
	table := "\n[replica]\nmax_lag = " + maxLag + "\n"
	if s3 {
		table += "to = \"s3\"\n"
	} else {
		table += "to = \"" + t.TempDir() + "\"\n"
	}
	var opts testenv.Options
	opts.Retention = retention
	if !s3 {
		opts.Storage = table
		table = ""
	}
	return &replicaEnv{Env: binaryEnv(t, c, s3, table, opts), s3: s3}
}

// store opens the replica's target as restore would.
func (r *replicaEnv) store(t *testing.T) objstore.Store {
	t.Helper()
	rc := r.Config.Replica
	if rc.To != "s3" {
		d, err := objstore.NewDir(rc.To)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	client, err := cli.NewS3Client("replica.s3", rc.S3)
	if err != nil {
		t.Fatal(err)
	}
	return objstore.NewS3(client, rc.S3.Bucket, rc.S3.Prefix, t.TempDir())
}

// objects lists every replica object.
func (r *replicaEnv) objects(t *testing.T) []string {
	t.Helper()
	var keys []string
	err := r.store(t).List(context.Background(), "replica/", func(in objstore.Info) error {
		keys = append(keys, in.Key)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// open reads a replica object's body (the head's, every slot's), with
// the master key of r's configuration.
func (r *replicaEnv) open(t *testing.T, key string) []byte {
	t.Helper()
	mk, err := seal.LoadMasterKey(r.Config.MasterKey)
	if err != nil {
		t.Fatal(err)
	}
	return replicaread.Body(t, r.store(t), mk, key)
}

// assertForgotten checks a finished purge's replica: one generation with
// a manifest, every object from before the purge gone unless the new
// manifest keeps it as a shard, and the destroyed key in no object.
func (r *replicaEnv) assertForgotten(t *testing.T, before []string, secret []byte) {
	t.Helper()
	now := r.objects(t)
	var manifests []string
	for _, k := range now {
		if strings.HasSuffix(k, "/manifest") {
			manifests = append(manifests, k)
		}
	}
	if len(manifests) != 1 {
		t.Fatalf("%d manifests after the purge, want 1: %v", len(manifests), now)
	}
	var m struct {
		Tables []struct {
			Shards []struct {
				Key string `json:"key"`
			} `json:"shards"`
		} `json:"tables"`
	}
	if err := json.Unmarshal(r.open(t, manifests[0]), &m); err != nil {
		t.Fatal(err)
	}
	kept := map[string]bool{}
	for _, tb := range m.Tables {
		for _, s := range tb.Shards {
			kept[s.Key] = true
		}
	}
	gen := strings.TrimSuffix(manifests[0], "manifest")
	for _, k := range now {
		if body := r.open(t, k); len(secret) > 0 && bytes.Contains(body, secret) {
			t.Errorf("%s holds the purged version's data key", k)
		}
		if k == "replica/head" {
			continue // rewritten by every cut: the one object not create-only
		}
		if !strings.HasPrefix(k, gen) && !kept[k] {
			t.Errorf("%s is of no generation the newest manifest names", k)
		}
		if slices.Contains(before, k) && !kept[k] {
			t.Errorf("%s, written before the purge, remains though the new generation does not keep it", k)
		}
	}
	for k := range kept {
		if !slices.Contains(now, k) {
			t.Errorf("the manifest names %s, which is missing", k)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// loseCatalog removes the catalog; with the storage bucket, the whole
// data directory, as a lost host.
func (r *replicaEnv) loseCatalog(t *testing.T) {
	t.Helper()
	if r.s3 {
		if err := os.RemoveAll(r.Config.DataDir); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, f := range []string{catalog.FileName, catalog.FileName + "-wal", catalog.FileName + "-shm"} {
		if err := os.Remove(filepath.Join(r.Config.DataDir, f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

// wrappedKey returns the data key of the vCon's version as the catalog
// holds it, the server stopped.
func (r *replicaEnv) wrappedKey(t *testing.T, uuid string) []byte {
	t.Helper()
	cat, err := catalog.Open(context.Background(), r.Config.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	u, _ := ids.Parse(uuid)
	var key []byte
	if err := cat.DB().QueryRow(`SELECT wrapped_key FROM versions WHERE uuid = ?`, u[:]).Scan(&key); err != nil {
		t.Fatal(err)
	}
	return key
}

// keysOf counts the data keys the catalog holds for a vCon.
func (r *replicaEnv) keysOf(t *testing.T, uuid string) int {
	t.Helper()
	cat, err := catalog.Open(context.Background(), r.Config.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	u, _ := ids.Parse(uuid)
	var n int
	if err := cat.DB().QueryRow(`SELECT count(*) FROM versions WHERE uuid = ? AND wrapped_key IS NOT NULL`, u[:]).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// readsWith checks that a key made before a kill reads an acknowledged
// vCon (nothing when token is empty).
func readsWith(t *testing.T, e *testenv.Env, token string, a acked) {
	t.Helper()
	if token == "" {
		return
	}
	for u, body := range a {
		if body == nil {
			continue
		}
		if got := e.Do("GET", "/vcons/"+u, token, nil); got.Status != 200 {
			t.Fatalf("the key whose creation was killed while replicated reads %d", got.Status)
		}
		return
	}
}

// runKilledOutput is runKilled, returning what the command printed.
func runKilledOutput(t *testing.T, e *testenv.Env, point string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.Binary(t), append(args, "--config", e.ConfigPath)...)
	cmd.Env = append(os.Environ(), crashpoint.EnvVar+"="+point)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if ctx.Err() != nil {
		t.Fatalf("vcon-server %v never reached %s in a minute:\n%s", args, point, tail(stderr.Bytes()))
	}
	if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("vcon-server %v was not killed at %s: %v\n%s", args, point, err, tail(stderr.Bytes()))
	}
	return stdout.String()
}

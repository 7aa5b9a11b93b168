package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/masterkey"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// tenantDeleteEnv is a server on a bucket with a replica in a directory,
// two tenants with three vCons each: acme, to be deleted, and globex.
type tenantDeleteEnv struct {
	*testenv.Env
	replicaDir     string
	acme, globex   string
	acmeKey, gKey  testenv.Key
	acmeV, globexV acked
	// logged are uuids the admin log names (a hold set and released):
	// it keeps its records, so the catalog holds them.
	logged map[string]bool
	// wrapped is acme's tenant key as its row held it, wrapped.
	wrapped []byte
}

func newTenantDeleteEnv(t *testing.T, c *crashEnv) *tenantDeleteEnv {
	return newTenantDeleteEnvAt(t, c, true)
}

// newTenantDeleteEnvAt is newTenantDeleteEnv on a bucket (s3) or in the
// data directory.
func newTenantDeleteEnvAt(t *testing.T, c *crashEnv, s3 bool) *tenantDeleteEnv {
	rdir := t.TempDir()
	table := "\n[replica]\nmax_lag = 0\nto = \"" + rdir + "\"\n"
	var opts testenv.Options
	if !s3 {
		opts.Storage, table = table, ""
	}
	e := binaryEnv(t, c, s3, table, opts)
	d := &tenantDeleteEnv{Env: e, replicaDir: rdir, acme: e.Tenant("acme"), globex: e.Tenant("globex"), acmeV: acked{}, globexV: acked{}}
	d.acmeKey = e.NewKey(d.acme, "write", "read")
	d.gKey = e.NewKey(d.globex, "write", "read")
	p := e.StartBinary()
	storeSome(t, e, d.acmeKey.Token, 3, d.acmeV)
	storeSome(t, e, d.gKey.Token, 3, d.globexV)
	p.Stop()
	cat, err := catalog.Open(context.Background(), e.Config.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	acme, _ := ids.Parse(d.acme)
	row, err := cat.TenantKey(context.Background(), acme)
	if err != nil {
		t.Fatal(err)
	}
	d.wrapped = row.Wrapped
	// The replica holds the key before the delete, as the scans after it
	// look for it.
	r := &replicaEnv{Env: e}
	held := false
	for _, k := range r.objects(t) {
		held = held || bytes.Contains(r.open(t, k), d.wrapped)
	}
	if !held {
		t.Fatal("no replica object holds the tenant's wrapped key before the delete: the scans would find nothing")
	}
	return d
}

// gone checks that nothing of acme is left: no name in the data
// directory, the bucket or the replica holds its id, no byte of the data
// directory holds one of its uuids, globex reads byte for byte, acme's key
// is refused and its tenant unknown, and check --deep is clean.
func (d *tenantDeleteEnv) gone(t *testing.T) {
	t.Helper()
	var needles [][]byte
	for u := range d.acmeV {
		if d.logged[u] {
			continue
		}
		id, _ := ids.Parse(u)
		needles = append(needles, []byte(u), id[:], []byte(id.Hex()))
	}
	scanDir := func(root string, contents bool) {
		err := filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if strings.Contains(p, d.acme) {
				t.Errorf("%s still names the deleted tenant", p)
			}
			if !contents || de.IsDir() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, n := range needles {
				if bytes.Contains(b, n) {
					t.Errorf("%s holds a uuid of the deleted tenant's vCons (at byte %d)", p, bytes.Index(b, n))
					os.WriteFile("/tmp/tdel-debug.db", b, 0o600)
					break
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	scanDir(d.Config.DataDir, true)
	if b, err := os.ReadFile(filepath.Join(d.Config.DataDir, catalog.FileName)); err == nil {
		found := false // the scan finds what is there: the other tenant's uuids
		for u := range d.globexV {
			id, _ := ids.Parse(u)
			found = found || bytes.Contains(b, id[:])
		}
		if !found {
			t.Error("the catalog holds no uuid of the other tenant's vCons: the scan reads nothing")
		}
	}
	scanDir(d.replicaDir, false) // sealed under the master key: opened below
	if d.Config.Replica != nil {
		d.replicaHolds(t, needles)
	}
	d.bucketAndServer(t)
}

// replicaHolds checks that every replica object, opened with the master
// key, holds neither the tenant's wrapped key nor a uuid of its vCons.
func (d *tenantDeleteEnv) replicaHolds(t *testing.T, needles [][]byte) {
	t.Helper()
	r := &replicaEnv{Env: d.Env}
	objects := r.objects(t)
	if len(objects) == 0 {
		t.Fatal("the replica holds no object")
	}
	control := false // the scan finds what is there: the other tenant's uuids
	for _, k := range objects {
		body := r.open(t, k)
		for u := range d.globexV {
			id, _ := ids.Parse(u)
			control = control || bytes.Contains(body, id[:])
		}
		if bytes.Contains(body, d.wrapped) {
			t.Errorf("the replica's %s holds the deleted tenant's key", k)
		}
		for _, n := range needles {
			if bytes.Contains(body, n) {
				t.Errorf("the replica's %s holds a uuid of the deleted tenant's vCons", k)
				break
			}
		}
	}
	if !control {
		t.Error("no replica object holds a uuid of the other tenant's vCons: the scan reads nothing")
	}
}

// bucketAndServer checks the store's keys, then the server's answers and
// check --deep.
func (d *tenantDeleteEnv) bucketAndServer(t *testing.T) {
	t.Helper()
	keys := 0
	err := d.Store().List(context.Background(), "", func(i objstore.Info) error {
		keys++
		if strings.Contains(i.Key, d.acme) {
			t.Errorf("the bucket still holds %s", i.Key)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if keys == 0 {
		t.Fatal("the bucket lists nothing: globex's objects are gone too")
	}
	p := d.StartBinary()
	verifyAcked(t, d.Env, d.gKey.Token, d.globexV)
	for u := range d.acmeV {
		if r := d.Do("GET", "/vcons/"+u, d.acmeKey.Token, nil); r.Status != 401 {
			t.Errorf("a read with the deleted tenant's key: %d, want 401", r.Status)
		}
		break
	}
	ops := d.OperatorKey()
	if r := d.Do("GET", "/admin/tenants/"+d.acme, ops.Token, nil); r.Status != 404 {
		t.Errorf("GET the deleted tenant: %d, want 404", r.Status)
	}
	p.Stop()
	checkDeep(t, d.Env)
}

// TestTenantDelete: tenant delete refuses without its confirmation and
// while a vCon is held; done, nothing of the tenant is left anywhere, its
// receipt verifies, the other tenant is whole, and a catalog backup taken
// before still unwraps the tenant's key with the file key (docs/keys.md,
// "tenant delete": only a tenant key in a KMS is gone from backups too).
func TestTenantDelete(t *testing.T) {
	c := &crashEnv{t: t}
	d := newTenantDeleteEnv(t, c)
	backup := filepath.Join(t.TempDir(), "before.db")
	d.CLI("backup", "--to", backup)

	if _, errOut, code := d.TryCLI("tenant", "delete", "acme"); code == 0 || !strings.Contains(errOut, "--confirm acme") {
		t.Fatalf("a delete without --confirm: exit %d: %s", code, errOut)
	}
	var held string
	for u := range d.acmeV {
		held = u
		break
	}
	d.CLI("hold", "set", "acme", held)
	if _, errOut, code := d.TryCLI("tenant", "delete", "acme", "--confirm", "acme"); code == 0 || !strings.Contains(errOut, "1 of its vCons are held") {
		t.Fatalf("a delete while a vCon is held: exit %d: %s", code, errOut)
	}
	d.CLI("hold", "release", "acme", held)
	d.logged = map[string]bool{held: true}

	var got struct {
		State, Receipt string
		Vcons          int
	}
	if err := json.Unmarshal([]byte(d.CLI("tenant", "delete", "acme", "--confirm", "acme")), &got); err != nil {
		t.Fatal(err)
	}
	if got.State != "done" || got.Vcons != 3 || got.Receipt == "" {
		t.Fatalf("the delete answered %+v", got)
	}
	rf := filepath.Join(t.TempDir(), "receipt.jws")
	if err := os.WriteFile(rf, []byte(got.Receipt), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := d.CLI("erasure", "verify", "--receipt", rf); !strings.Contains(out, `"valid":true`) || !strings.Contains(out, `"filter":"tenant"`) {
		t.Fatalf("erasure verify of the receipt: %s", out)
	}
	d.gone(t)

	// The backup taken before holds the tenant's key wrapped under the
	// master key: with the file key it still unwraps.
	dir := t.TempDir()
	b, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "catalog.db"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	acme, _ := ids.Parse(d.acme)
	row, err := cat.TenantKey(context.Background(), acme)
	if err != nil {
		t.Fatalf("the backup's key row of the deleted tenant: %v", err)
	}
	mk, _, err := masterkey.Load(context.Background(), d.Config.MasterKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mk.UnwrapTenantKey(acme, row.Wrapped); err != nil {
		t.Fatalf("the backup's key of the deleted tenant does not unwrap with the file key: %v", err)
	}
}

// crashTenantDelete cuts a tenant delete at point; the next start
// finishes it.
func crashTenantDelete(t *testing.T, c *crashEnv, point string) {
	d := newTenantDeleteEnv(t, c)
	runKilled(t, d.Env, point, "tenant", "delete", "acme", "--confirm", "acme")
	if out, errOut, code := d.TryCLI("check"); code != 0 || !strings.Contains(errOut, "1 tenant delete(s) began and did not finish") {
		t.Fatalf("check after the cut delete: exit %d\n%s%s", code, out, errOut)
	}
	if point == crashpoint.TenantDeleteAfterObjects {
		// Step 2 came before the objects: the replica forgot the key.
		r := &replicaEnv{Env: d.Env}
		for _, k := range r.objects(t) {
			if bytes.Contains(r.open(t, k), d.wrapped) {
				t.Fatalf("the replica's %s still holds the tenant's key after its objects went", k)
			}
		}
	}
	recoverAndCheck(t, d.Env, d.gKey.Token, d.globexV)
	var got struct{ State string }
	if err := json.Unmarshal([]byte(d.CLI("tenant", "delete", d.acme)), &got); err != nil || got.State != "done" {
		t.Fatalf("the delete after the start: %+v %v", got, err)
	}
	d.gone(t)
}

// TestTenantDeleteRoute: DELETE /admin/tenants/{id} on a running server
// with its objects in the data directory: refused unconfirmed, then done,
// the receipt in the answer; the tenant's key is forgotten by the process
// that held it, and nothing of the tenant is left.
func TestTenantDeleteRoute(t *testing.T) {
	c := &crashEnv{t: t}
	d := newTenantDeleteEnvAt(t, c, false)
	ops := d.OperatorKey("tenants")
	p := d.StartBinary()
	verifyAcked(t, d.Env, d.acmeKey.Token, d.acmeV) // the server holds acme's key in memory
	js := []string{"Content-Type", "application/json"}
	if r := d.Do("DELETE", "/admin/tenants/"+d.acme, ops.Token, []byte(`{"confirm":"globex"}`), js...); r.Status != 400 {
		t.Fatalf("a delete confirmed with another name: %d %s", r.Status, r.Body)
	}
	r := d.Do("DELETE", "/admin/tenants/"+d.acme, ops.Token, []byte(`{"confirm":"acme"}`), js...)
	var got struct {
		State, Receipt string
		Versions       int
	}
	if r.Status != 200 || json.Unmarshal(r.Body, &got) != nil || got.State != "done" || got.Versions != 3 || got.Receipt == "" {
		t.Fatalf("the delete: %d %s", r.Status, r.Body)
	}
	if b, _ := os.ReadFile(p.Log); bytes.Contains(b, []byte(d.acme)) {
		t.Error("the server's log names the deleted tenant")
	}
	p.Stop()
	d.gone(t)
}

// TestTenantDeleteParquet: with Parquet storage, the tenant's pack files
// and manifests go with its objects, and the other tenant's pack runs go
// on.
func TestTenantDeleteParquet(t *testing.T) {
	c := &crashEnv{t: t}
	e, k, a, _ := packed(t, c, "")
	d := &tenantDeleteEnv{Env: e, replicaDir: t.TempDir(), acme: k.Tenant, acmeKey: k, acmeV: a, globexV: acked{}}
	d.globex = e.Tenant("globex")
	d.gKey = e.NewKey(d.globex, "write", "read")
	p := e.StartBinary()
	storeSome(t, e, d.gKey.Token, 3, d.globexV)
	p.Stop()
	packs := 0
	e.Store().List(context.Background(), "", func(i objstore.Info) error {
		if strings.Contains(i.Key, d.acme+"/parquet/") || strings.Contains(i.Key, d.acme+"/manifest/") {
			packs++
		}
		return nil
	})
	if packs == 0 {
		t.Fatal("the tenant has no pack file nor manifest to delete")
	}
	e.CLI("tenant", "delete", "acme", "--confirm", "acme")
	d.gone(t)
}

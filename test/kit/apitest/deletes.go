package apitest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/seal"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

func noClearContent(t *testing.T, e *testenv.Env) {
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	secrets := []string{"Quarterly Zanzibar Merger", "Philomena Quackenbush", "+15555550199"}
	for i := 0; i < 5; i++ {
		u := ids.NewRandom().String()
		expect(t, e.Do("POST", "/vcons", k.Token, NewVcon(u, secrets[0], secrets[2])[:0:0], "Content-Type", "application/vcon"), 400, "empty")
		body := []byte(fmt.Sprintf(`{"vcon":"0.4.0","uuid":%q,"subject":%q,"parties":[{"tel":%q,"name":%q}],"dialog":[{"type":"text","body":"%s said hello"}]}`,
			u, secrets[0], secrets[2], secrets[1], secrets[1]))
		expect(t, e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon"), 201, "POST")
	}
	e.Stop() // the catalog's WAL is folded in at close; scan both ways
	scanForClear(t, e.Config.DataDir, secrets)
}

func scanForClear(t testing.TB, dir string, secrets []string) {
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds %q in clear", path, s)
			}
		}
		return nil
	})
}

func deleteWithRetention(t *testing.T, newEnv NewEnv) {
	clock := testenv.NewClock(time.Now())
	e := newEnv(t, testenv.Options{Retention: "30d", Now: clock.Now})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read", "delete")
	uuid := ids.NewRandom().String()
	expect(t, e.Do("POST", "/vcons", k.Token, NewVcon(uuid, "keep", "+15555550100"), "Content-Type", "application/vcon"), 201, "POST")
	expect(t, e.Do("PUT", "/vcons/"+uuid, k.Token, NewVcon(uuid, "keep 2", "+15555550100"), "Content-Type", "application/vcon"), 200, "PUT")
	expect(t, e.Do("DELETE", "/vcons/"+uuid, k.Token, nil), 204, "DELETE")
	expect(t, e.Do("GET", "/vcons/"+uuid, k.Token, nil), 404, "GET after DELETE")
	expect(t, e.Do("DELETE", "/vcons/"+uuid, k.Token, nil), 404, "second DELETE")
	var vs struct{ Versions []struct{ Hidden bool } }
	e.Do("GET", "/vcons/"+uuid+"/versions", k.Token, nil).JSON(t, &vs)
	if len(vs.Versions) != 2 || !vs.Versions[0].Hidden || !vs.Versions[1].Hidden {
		t.Fatalf("versions after DELETE: %+v", vs)
	}
	e.Daemon.Sweep(t.Context())
	if n := e.Count("objects"); n != 2 {
		t.Fatalf("%d objects before retention ran out, want 2", n)
	}
	clock.Advance(29 * 24 * time.Hour)
	e.Daemon.Sweep(t.Context())
	if n := e.Count("objects"); n != 2 {
		t.Fatalf("%d objects a day before retention ran out, want 2", n)
	}
	// The tenant's retention as set at the sweep decides: lengthen it, and
	// nothing is purged when the server default would have.
	e.CLI("tenant", "set-retention", "acme", "60d")
	clock.Advance(2 * 24 * time.Hour)
	e.Daemon.Sweep(t.Context())
	if n := e.Count("objects"); n != 2 {
		t.Fatalf("%d objects with retention 60d, want 2", n)
	}
	e.CLI("tenant", "set-retention", "acme", "default")
	e.Daemon.Sweep(t.Context())
	if n := e.Count("objects"); n != 0 {
		t.Fatalf("%d objects after retention ran out, want 0", n)
	}
	expect(t, e.Do("GET", "/vcons/"+uuid+"/versions", k.Token, nil), 404, "versions after the purge")
	if n := e.Count("purged"); n != 2 {
		t.Fatalf("%d tombstones, want 2", n)
	}
}

func deleteZeroRetention(t *testing.T, e *testenv.Env) {
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read", "delete")
	uuid := ids.NewRandom().String()
	expect(t, e.Do("POST", "/vcons", k.Token, NewVcon(uuid, "gone", "+15555550100"), "Content-Type", "application/vcon"), 201, "POST")
	var wrapped []byte
	if err := e.Daemon.Cat.DB().QueryRow(`SELECT wrapped_key FROM versions`).Scan(&wrapped); err != nil || len(wrapped) < 32 {
		t.Fatalf("wrapped key: %v %x", err, wrapped)
	}
	v, err := e.Daemon.Cat.Current(t.Context(), ids.MustParse(tenant), ids.MustParse(uuid))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := e.Daemon.Archive.Sealed(t.Context(), v)
	if err != nil {
		t.Fatal(err)
	}
	sealedCopy, _ := io.ReadAll(rc)
	rc.Close()
	expect(t, e.Do("DELETE", "/vcons/"+uuid, k.Token, nil), 204, "DELETE")
	if n := e.Count("objects"); n != 0 {
		t.Fatalf("%d objects when the 204 arrived", n)
	}
	var keys int
	e.Daemon.Cat.DB().QueryRow(`SELECT count(*) FROM versions WHERE wrapped_key IS NOT NULL`).Scan(&keys)
	if keys != 0 {
		t.Fatalf("%d data keys left in the catalog", keys)
	}
	// Shredding: the wrapped key is in none of the catalog's files.
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(filepath.Join(e.Config.DataDir, "catalog.db"+suffix))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, wrapped) {
			t.Fatalf("catalog.db%s still holds the purged version's wrapped key", suffix)
		}
	}
	// The copy taken before the purge can no longer be opened: its key is
	// gone from the catalog, and no other key fits.
	var guess seal.DataKey
	if r, err := seal.NewReader(bytes.NewReader(sealedCopy), guess, v.Tenant, v.ID); err == nil {
		if _, err := io.ReadAll(r); err == nil {
			t.Fatal("a sealed copy opened without its key")
		}
	}
	expect(t, e.Do("GET", "/vcons/"+uuid+"/versions", k.Token, nil), 404, "versions after a 0d purge")
	expect(t, e.Do("POST", "/vcons", k.Token, NewVcon(uuid, "again", "+15555550100"), "Content-Type", "application/vcon"), 201, "the uuid may be stored again")
}

func holds(t *testing.T, newEnv NewEnv) {
	clock := testenv.NewClock(time.Now())
	e := newEnv(t, testenv.Options{Retention: "1d", Now: clock.Now})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read", "delete")
	ops := e.OperatorKey()
	uuid := ids.NewRandom().String()
	expect(t, e.Do("POST", "/vcons", k.Token, NewVcon(uuid, "held", "+15555550100"), "Content-Type", "application/vcon"), 201, "POST")
	expect(t, e.Do("PUT", "/vcons/"+uuid, k.Token, NewVcon(uuid, "held 2", "+15555550100"), "Content-Type", "application/vcon"), 200, "PUT")
	expect(t, e.Do("PUT", "/admin/tenants/"+tenant+"/holds/"+uuid, ops.Token, nil), 200, "hold")
	expect(t, e.Do("DELETE", "/vcons/"+uuid, k.Token, nil), 409, "DELETE of a held vCon")
	clock.Advance(3 * 24 * time.Hour)
	e.Daemon.Sweep(t.Context())
	var vs struct{ Versions []struct{ Hidden bool } }
	e.Do("GET", "/vcons/"+uuid+"/versions", k.Token, nil).JSON(t, &vs)
	if len(vs.Versions) != 2 {
		t.Fatalf("a held vCon's hidden version was purged: %+v", vs)
	}
	if out := e.CLI("hold", "list", "acme"); !strings.Contains(out, uuid) {
		t.Fatalf("hold list: %s", out)
	}
	e.CLI("hold", "release", "acme", uuid)
	e.Daemon.Sweep(t.Context())
	e.Do("GET", "/vcons/"+uuid+"/versions", k.Token, nil).JSON(t, &vs)
	if len(vs.Versions) != 1 {
		t.Fatalf("after release the hidden version stays: %+v", vs)
	}
	expect(t, e.Do("DELETE", "/vcons/"+uuid, k.Token, nil), 204, "DELETE after release")
	e.CLI("hold", "set", "acme", uuid)
	clock.Advance(3 * 24 * time.Hour)
	e.Daemon.Sweep(t.Context())
	e.Do("GET", "/vcons/"+uuid+"/versions", k.Token, nil).JSON(t, &vs)
	if len(vs.Versions) != 1 {
		t.Fatalf("a hold set after DELETE must stop the purge: %+v", vs)
	}
	expect(t, e.Do("DELETE", "/admin/tenants/"+tenant+"/holds/"+uuid, ops.Token, nil), 200, "release over HTTPS")
	e.Daemon.Sweep(t.Context())
	expect(t, e.Do("GET", "/vcons/"+uuid+"/versions", k.Token, nil), 404, "purged after release")
}

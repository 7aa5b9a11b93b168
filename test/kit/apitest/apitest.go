// Package apitest is the HTTP suite of the store: every route, every
// refusal, deletes, retention, holds and audit records, run against a real
// server over real TLS. Each storage kind runs the same suite.
package apitest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/ids"
	"github.com/vcon-server/vcon-server/seal"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
	"github.com/vcon-server/vcon-server/vcon"
)

// NewEnv starts a server for one test with the given options.
type NewEnv func(t *testing.T, opts testenv.Options) *testenv.Env

// Run runs the whole suite.
func Run(t *testing.T, newEnv NewEnv) {
	t.Run("StoreReadEveryForm", func(t *testing.T) { storeReadEveryForm(t, newEnv(t, testenv.Options{})) })
	t.Run("SharedVcons", func(t *testing.T) { sharedVcons(t, newEnv(t, testenv.Options{})) })
	t.Run("ReplaceAndVersions", func(t *testing.T) { replaceAndVersions(t, newEnv(t, testenv.Options{})) })
	t.Run("List", func(t *testing.T) { list(t, newEnv(t, testenv.Options{})) })
	t.Run("Refusals", func(t *testing.T) { refusals(t, newEnv(t, testenv.Options{MaxVconSize: "1MiB"})) })
	t.Run("NoClearContentOnDisk", func(t *testing.T) { noClearContent(t, newEnv(t, testenv.Options{})) })
	t.Run("DeleteKeepsUntilRetention", func(t *testing.T) { deleteWithRetention(t, newEnv) })
	t.Run("DeleteWithZeroRetentionPurges", func(t *testing.T) { deleteZeroRetention(t, newEnv(t, testenv.Options{Retention: "0d"})) })
	t.Run("Holds", func(t *testing.T) { holds(t, newEnv) })
	t.Run("AdminAPI", func(t *testing.T) { adminAPI(t, newEnv(t, testenv.Options{})) })
	t.Run("Audit", func(t *testing.T) { auditRecords(t, newEnv(t, testenv.Options{})) })
	t.Run("TenantIsolation", func(t *testing.T) { isolation(t, newEnv(t, testenv.Options{})) })
	t.Run("ConcurrentStores", func(t *testing.T) { concurrentStores(t, newEnv(t, testenv.Options{})) })
}

// Fixture is one of the project's own test vCons.
type Fixture struct {
	Name        string
	Body        []byte
	UUID        string
	Form        vcon.Form
	ContentType string
	Encoding    string
}

// Fixtures reads testdata/vcons: each valid vCon, plain and gzip (sent
// once with Content-Encoding and once as application/vcon+gzip).
func Fixtures(t testing.TB) []Fixture {
	dir := filepath.Join(testenv.ModuleRoot(t), "testdata", "vcons")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []Fixture
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "invalid") || !(strings.HasSuffix(name, ".vcon") || strings.HasSuffix(name, ".vcon.gz")) {
			continue
		}
		body, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		gz := strings.HasSuffix(name, ".gz")
		m, err := vcon.Inspect(bytes.NewReader(body), gz, 64<<20)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if gz {
			out = append(out,
				Fixture{name + " (Content-Encoding)", body, m.UUID, m.Form, "application/vcon", "gzip"},
				Fixture{name + " (vcon+gzip)", body, m.UUID, m.Form, "application/vcon+gzip", ""})
		} else {
			out = append(out, Fixture{name, body, m.UUID, m.Form, "application/vcon", ""})
		}
	}
	if len(out) < 8 {
		t.Fatalf("only %d fixtures in %s", len(out), dir)
	}
	return out
}

func headers(f Fixture) []string {
	h := []string{"Content-Type", f.ContentType}
	if f.Encoding != "" {
		h = append(h, "Content-Encoding", f.Encoding)
	}
	return h
}

func expect(t testing.TB, r testenv.Response, status int, what string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s: status %d, want %d; body %s", what, r.Status, status, r.Body)
	}
}

func storeReadEveryForm(t *testing.T, e *testenv.Env) {
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	for _, f := range Fixtures(t) {
		// Fixtures share uuids; PUT stores each as a new version.
		r := e.Do("PUT", "/vcons/"+f.UUID, k.Token, f.Body, headers(f)...)
		if r.Status != 201 && r.Status != 200 {
			t.Fatalf("%s: PUT status %d: %s", f.Name, r.Status, r.Body)
		}
		var st struct{ UUID, Version, StoredAt string }
		r.JSON(t, &st)
		if st.UUID != f.UUID {
			t.Fatalf("%s: uuid %s, want %s", f.Name, st.UUID, f.UUID)
		}
		got := e.Do("GET", "/vcons/"+f.UUID, k.Token, nil)
		expect(t, got, 200, f.Name+": GET")
		if !bytes.Equal(got.Body, f.Body) {
			t.Fatalf("%s: read back %d bytes differing from the %d stored", f.Name, len(got.Body), len(f.Body))
		}
		if ct := got.Header.Get("Content-Type"); ct != f.ContentType {
			t.Errorf("%s: Content-Type %q, want %q", f.Name, ct, f.ContentType)
		}
		if ce := got.Header.Get("Content-Encoding"); ce != f.Encoding {
			t.Errorf("%s: Content-Encoding %q, want %q", f.Name, ce, f.Encoding)
		}
		if et := got.Header.Get("ETag"); et != `"`+st.Version+`"` {
			t.Errorf("%s: ETag %q, want the version %s", f.Name, et, st.Version)
		}
		if nm := e.Do("GET", "/vcons/"+f.UUID, k.Token, nil, "If-None-Match", `"`+st.Version+`"`); nm.Status != 304 {
			t.Errorf("%s: If-None-Match: status %d, want 304", f.Name, nm.Status)
		}
	}
	// POST of a fresh uuid answers 201 with Location.
	body := NewVcon(ids.NewRandom().String(), "post example", "+15555550100")
	r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon+json")
	expect(t, r, 201, "POST")
	var st struct{ UUID string }
	r.JSON(t, &st)
	if loc := r.Header.Get("Location"); loc != "/vcons/"+st.UUID {
		t.Fatalf("Location %q", loc)
	}
}

// NewVcon is a small unsigned vCon with a subject and one party.
func NewVcon(uuid, subject, tel string) []byte {
	return []byte(fmt.Sprintf(`{"vcon":"0.4.0","uuid":%q,"created_at":"2026-11-05T12:00:00Z","subject":%q,"parties":[{"tel":%q,"name":"Test Caller"}],"dialog":[],"attachments":[],"analysis":[]}`, uuid, subject, tel))
}

func sharedVcons(t *testing.T, e *testenv.Env) {
	root := testenv.Shared(t, "vcons")
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	n := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".vcon") || strings.HasSuffix(path, ".json")) {
			return err
		}
		body, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		name := filepath.Base(path)
		m, ierr := vcon.Inspect(bytes.NewReader(body), false, 64<<20)
		if name == "simple-vcon.vcon" || name == "ab.vcon" {
			r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon")
			expect(t, r, 400, name)
			var msg struct{ Error string }
			r.JSON(t, &msg)
			if name == "ab.vcon" && !strings.Contains(msg.Error, "uuid") {
				t.Errorf("%s: the refusal %q does not name the uuid", name, msg.Error)
			}
			if name == "simple-vcon.vcon" && !strings.Contains(msg.Error, "JSON") {
				t.Errorf("%s: the refusal %q does not say it is not JSON", name, msg.Error)
			}
			return nil
		}
		if ierr != nil {
			t.Errorf("%s: %v", name, ierr)
			return nil
		}
		r := e.Do("PUT", "/vcons/"+m.UUID, k.Token, body, "Content-Type", "application/vcon")
		if r.Status != 201 && r.Status != 200 {
			t.Errorf("%s: PUT status %d: %s", name, r.Status, r.Body)
			return nil
		}
		got := e.Do("GET", "/vcons/"+m.UUID, k.Token, nil)
		if got.Status != 200 || !bytes.Equal(got.Body, body) {
			t.Errorf("%s: read back differs (status %d)", name, got.Status)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 50 {
		t.Fatalf("only %d shared vCons round-tripped", n)
	}
	t.Logf("%d vCons of ../shared/vcons stored and read back byte for byte", n)
}

func replaceAndVersions(t *testing.T, e *testenv.Env) {
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	uuid := ids.NewRandom().String()
	expect(t, e.Do("PUT", "/vcons/"+uuid, k.Token, NewVcon(uuid, "first", "+15555550101"), "Content-Type", "application/vcon"), 201, "first PUT")
	second := NewVcon(uuid, "second", "+15555550102")
	expect(t, e.Do("PUT", "/vcons/"+uuid, k.Token, second, "Content-Type", "application/vcon"), 200, "replacing PUT")
	expect(t, e.Do("POST", "/vcons", k.Token, second, "Content-Type", "application/vcon"), 409, "POST of a stored uuid")
	got := e.Do("GET", "/vcons/"+uuid, k.Token, nil)
	if !bytes.Equal(got.Body, second) {
		t.Fatalf("GET after replace returned %s", got.Body)
	}
	var vs struct {
		UUID     string
		Versions []struct {
			Version  string
			Current  bool
			Hidden   bool
			HiddenAt *string `json:"hidden_at"`
			Form     string
		}
	}
	e.Do("GET", "/vcons/"+uuid+"/versions", k.Token, nil).JSON(t, &vs)
	if len(vs.Versions) != 2 || !vs.Versions[0].Current || vs.Versions[0].Hidden || vs.Versions[1].Current || !vs.Versions[1].Hidden || vs.Versions[1].HiddenAt == nil {
		t.Fatalf("versions: %+v", vs)
	}
	if vs.Versions[0].Version <= vs.Versions[1].Version {
		t.Fatalf("versions not newest first: %+v", vs)
	}
}

func list(t *testing.T, e *testenv.Env) {
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read", "delete")
	want := map[string]bool{}
	for i := 0; i < 25; i++ {
		u := ids.NewRandom().String()
		expect(t, e.Do("POST", "/vcons", k.Token, NewVcon(u, "list", "+15555550100"), "Content-Type", "application/vcon"), 201, "POST")
		want[u] = true
	}
	var deleted string
	for u := range want {
		deleted = u
		break
	}
	expect(t, e.Do("DELETE", "/vcons/"+deleted, k.Token, nil), 204, "DELETE")
	delete(want, deleted)
	got := map[string]bool{}
	after := ""
	for pages := 0; ; pages++ {
		path := "/vcons?limit=10"
		if after != "" {
			path += "&after=" + after
		}
		var page struct {
			UUIDs []string
			Next  *string
		}
		r := e.Do("GET", path, k.Token, nil)
		expect(t, r, 200, "list")
		r.JSON(t, &page)
		for _, u := range page.UUIDs {
			if got[u] {
				t.Fatalf("%s listed twice", u)
			}
			got[u] = true
		}
		if page.Next == nil {
			break
		}
		after = *page.Next
		if pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d uuids, want %d", len(got), len(want))
	}
	for u := range want {
		if !got[u] {
			t.Fatalf("%s not listed", u)
		}
	}
	expect(t, e.Do("GET", "/vcons?limit=0", k.Token, nil), 400, "limit=0")
	expect(t, e.Do("GET", "/vcons?after=x", k.Token, nil), 400, "after=x")
}

// gzipBomb is a gzip stream that inflates to n zero bytes.
func gzipBomb(t testing.TB, n int64) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write([]byte(`{"uuid":"` + ids.NewRandom().String() + `","x":"`))
	zeros := make([]byte, 1<<20)
	for i := range zeros {
		zeros[i] = 'a'
	}
	for w := int64(0); w < n; w += int64(len(zeros)) {
		zw.Write(zeros)
	}
	zw.Close()
	return buf.Bytes()
}

func refusals(t *testing.T, e *testenv.Env) {
	tenant := e.Tenant("acme")
	other := e.Tenant("globex")
	writer := e.NewKey(tenant, "write")
	reader := e.NewKey(tenant, "read")
	otherKey := e.NewKey(other, "write", "read", "delete")
	uuid := ids.NewRandom().String()
	body := NewVcon(uuid, "refusals", "+15555550100")
	ct := []string{"Content-Type", "application/vcon"}

	expect(t, e.Do("POST", "/vcons", "", body, ct...), 401, "no token")
	expect(t, e.Do("POST", "/vcons", "vcs_0000000000000000_wrong", body, ct...), 401, "wrong token")
	expect(t, e.Do("POST", "/vcons", "not-even-a-token", body, ct...), 401, "malformed token")
	expect(t, e.Do("POST", "/vcons", reader.Token, body, ct...), 403, "read key writing")
	expect(t, e.Do("DELETE", "/vcons/"+uuid, writer.Token, nil), 403, "write key deleting")
	expect(t, e.Do("POST", "/vcons", writer.Token, body, "Content-Type", "text/plain"), 415, "text/plain")
	expect(t, e.Do("POST", "/vcons", writer.Token, body), 415, "no content type")
	expect(t, e.Do("POST", "/vcons", writer.Token, body, "Content-Type", "application/vcon", "Content-Encoding", "br"), 415, "brotli")
	expect(t, e.Do("POST", "/vcons", writer.Token, []byte(`{"uuid": "`), ct...), 400, "malformed JSON")
	expect(t, e.Do("POST", "/vcons", writer.Token, []byte(`[1,2,3]`), ct...), 400, "an array")
	expect(t, e.Do("POST", "/vcons", writer.Token, []byte(`{"vcon":"0.4.0","parties":[]}`), ct...), 400, "no uuid")
	expect(t, e.Do("POST", "/vcons", writer.Token, []byte(`{"uuid":"not-a-uuid"}`), ct...), 400, "bad uuid")
	expect(t, e.Do("POST", "/vcons", writer.Token, []byte(strings.Repeat("[", 100000)), ct...), 400, "deep nesting")
	other2 := ids.NewRandom().String()
	expect(t, e.Do("PUT", "/vcons/"+other2, writer.Token, body, ct...), 400, "uuid mismatch")
	expect(t, e.Do("PUT", "/vcons/../../etc/passwd", writer.Token, body, ct...), 404, "path trick")
	big := append([]byte(`{"uuid":"`+ids.NewRandom().String()+`","x":"`), bytes.Repeat([]byte("a"), 2<<20)...)
	big = append(big, `"}`...)
	expect(t, e.Do("POST", "/vcons", writer.Token, big, ct...), 413, "oversized body")
	expect(t, e.Do("POST", "/vcons", writer.Token, gzipBomb(t, 256<<20), "Content-Type", "application/vcon+gzip"), 413, "gzip bomb")
	expect(t, e.Do("POST", "/vcons", writer.Token, []byte("\x1f\x8bnot gzip at all"), "Content-Type", "application/vcon", "Content-Encoding", "gzip"), 400, "broken gzip")

	// None of the refusals left anything: the uuid is unknown.
	expect(t, e.Do("POST", "/vcons", writer.Token, body, ct...), 201, "the good store after the refusals")
	expect(t, e.Do("GET", "/vcons/"+uuid, otherKey.Token, nil), 404, "another tenant's uuid")
	expect(t, e.Do("GET", "/vcons/"+uuid+"/versions", otherKey.Token, nil), 404, "another tenant's versions")
	expect(t, e.Do("DELETE", "/vcons/"+uuid, otherKey.Token, nil), 404, "another tenant's delete")
	expect(t, e.Do("PUT", "/vcons/"+uuid, otherKey.Token, body, ct...), 201, "another tenant's PUT is its own vCon")
	expect(t, e.Do("GET", "/vcons/"+uuid, reader.Token, nil), 200, "still ours")
	expect(t, e.Do("GET", "/vcons/"+other2, reader.Token, nil), 404, "missing uuid")
	expect(t, e.Do("GET", "/admin/tenants", writer.Token, nil), 403, "tenant key on the admin API")

	objects := e.Count("objects")
	if objects != 2 {
		t.Fatalf("%d object files after the refusals, want 2", objects)
	}
}

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

func adminAPI(t *testing.T, e *testenv.Env) {
	ops := e.OperatorKey()
	r := e.Do("POST", "/admin/tenants", ops.Token, []byte(`{"name":"initech"}`), "Content-Type", "application/json")
	expect(t, r, 201, "create tenant")
	var tenant struct {
		ID, Name, Metadata string
		Retention          *string
	}
	r.JSON(t, &tenant)
	if tenant.Name != "initech" || tenant.Metadata != "none" || tenant.Retention != nil {
		t.Fatalf("tenant: %+v", tenant)
	}
	expect(t, e.Do("POST", "/admin/tenants", ops.Token, []byte(`{"name":"initech"}`)), 409, "duplicate name")
	expect(t, e.Do("POST", "/admin/tenants", ops.Token, []byte(`{"name":"Bad Name"}`)), 400, "bad name")
	expect(t, e.Do("POST", "/admin/tenants", ops.Token, []byte(`{"nam":"x"}`)), 400, "unknown field")
	expect(t, e.Do("GET", "/admin/tenants/"+tenant.ID, ops.Token, nil), 200, "show")
	expect(t, e.Do("GET", "/admin/tenants/"+ids.NewRandom().String(), ops.Token, nil), 404, "show missing")
	r = e.Do("PUT", "/admin/tenants/"+tenant.ID+"/metadata", ops.Token, []byte(`{"metadata":"counts"}`))
	expect(t, r, 200, "metadata")
	r.JSON(t, &tenant)
	if tenant.Metadata != "counts" {
		t.Fatalf("metadata: %+v", tenant)
	}
	expect(t, e.Do("PUT", "/admin/tenants/"+tenant.ID+"/metadata", ops.Token, []byte(`{"metadata":"most"}`)), 400, "unknown level")
	r = e.Do("PUT", "/admin/tenants/"+tenant.ID+"/retention", ops.Token, []byte(`{"retention":"7d"}`))
	expect(t, r, 200, "retention")
	r.JSON(t, &tenant)
	if tenant.Retention == nil || *tenant.Retention != "7d" {
		t.Fatalf("retention: %+v", tenant)
	}
	expect(t, e.Do("PUT", "/admin/tenants/"+tenant.ID+"/retention", ops.Token, []byte(`{"retention":"7"}`)), 400, "retention without d")
	r = e.Do("PUT", "/admin/tenants/"+tenant.ID+"/retention", ops.Token, []byte(`{"retention":null}`))
	r.JSON(t, &tenant)
	if tenant.Retention != nil {
		t.Fatalf("retention null: %+v", tenant)
	}
	var all []json.RawMessage
	e.Do("GET", "/admin/tenants", ops.Token, nil).JSON(t, &all)
	if len(all) != 1 {
		t.Fatalf("tenants: %s", all)
	}
	m := e.Do("GET", "/metrics", ops.Token, nil)
	expect(t, m, 200, "metrics")
	if !bytes.Contains(m.Body, []byte("vcon_http_requests_total")) || bytes.Contains(m.Body, []byte(tenant.ID)) {
		t.Fatalf("metrics:\n%s", m.Body)
	}
}

func auditRecords(t *testing.T, e *testenv.Env) {
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	other := e.NewKey(e.Tenant("globex"), "read")
	uuid := ids.NewRandom().String()
	missing := ids.NewRandom().String()
	ct := []string{"Content-Type", "application/vcon"}
	e.Do("POST", "/vcons", k.Token, NewVcon(uuid, "audit", "+15555550100"), ct...)
	e.Do("PUT", "/vcons/"+uuid, k.Token, NewVcon(uuid, "audit 2", "+15555550100"), ct...)
	e.Do("POST", "/vcons", k.Token, NewVcon(uuid, "audit 3", "+15555550100"), ct...)
	e.Do("GET", "/vcons/"+uuid, k.Token, nil)
	e.Do("GET", "/vcons/"+missing, k.Token, nil)
	e.Do("DELETE", "/vcons/"+uuid, k.Token, nil)
	e.Do("GET", "/vcons/"+uuid, other.Token, nil)
	e.Do("GET", "/vcons/"+uuid, "vcs_bad", nil)
	e.CLI("tenant", "set-metadata", "acme", "form")

	type rec struct {
		Actor, Label, Action, Target string
		Status                       int
	}
	read := func(args ...string) []rec {
		var out []rec
		for _, line := range strings.Split(strings.TrimSpace(e.CLI(append([]string{"audit", "export"}, args...)...)), "\n") {
			var r rec
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			out = append(out, r)
		}
		return out
	}
	key := "key:" + k.ID
	label := "test-write-read"
	want := []rec{
		{"cli", "", "key", k.ID, 200},
		{key, label, "store", uuid, 201},
		{key, label, "replace", uuid, 200},
		{key, label, "store", uuid, 409},
		{key, label, "read", uuid, 200},
		{key, label, "read", missing, 404},
		{key, label, "delete", uuid, 403},
		{"cli", "", "metadata", "", 200},
	}
	got := read("--tenant", "acme")
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("acme's audit log:\n got %v\nwant %v", got, want)
	}
	gotOther := read("--tenant", "globex")
	if len(gotOther) != 2 || gotOther[1].Action != "read" || gotOther[1].Status != 404 || gotOther[1].Target != uuid {
		t.Fatalf("globex's audit log: %v", gotOther)
	}
	admin := read("--admin")
	actions := []string{}
	for _, r := range admin {
		actions = append(actions, fmt.Sprintf("%s:%d", r.Action, r.Status))
	}
	if strings.Join(actions, " ") != "tenant_create:200 key_create:200 tenant_create:200 key_create:200 authenticate:401 tenant_metadata:200" {
		t.Fatalf("admin log: %v", actions)
	}
	_, errOut, code := e.TryCLI("audit", "export", "--tenant", "acme", "--since", "yesterday")
	if code != 1 || !strings.Contains(errOut, `"yesterday" is not an RFC 3339 time such as 2026-11-05T00:00:00Z`) {
		t.Fatalf("bad --since: %d %s", code, errOut)
	}
}

func isolation(t *testing.T, e *testenv.Env) {
	a := e.Tenant("acme")
	b := e.Tenant("globex")
	ka := e.NewKey(a, "write", "read", "delete")
	kb := e.NewKey(b, "write", "read", "delete")
	uuid := ids.NewRandom().String()
	body := NewVcon(uuid, "isolation", "+15555550100")
	expect(t, e.Do("POST", "/vcons", ka.Token, body, "Content-Type", "application/vcon"), 201, "POST")
	expect(t, e.Do("GET", "/vcons/"+uuid, kb.Token, nil), 404, "GET")
	expect(t, e.Do("GET", "/vcons/"+uuid+"/versions", kb.Token, nil), 404, "versions")
	expect(t, e.Do("DELETE", "/vcons/"+uuid, kb.Token, nil), 404, "DELETE")
	var page struct{ UUIDs []string }
	e.Do("GET", "/vcons", kb.Token, nil).JSON(t, &page)
	if len(page.UUIDs) != 0 {
		t.Fatalf("globex lists %v", page.UUIDs)
	}
	for _, path := range []string{"/admin/tenants", "/admin/tenants/" + a, "/metrics"} {
		expect(t, e.Do("GET", path, kb.Token, nil), 403, path)
	}
	got := e.Do("GET", "/vcons/"+uuid, ka.Token, nil)
	if !bytes.Equal(got.Body, body) {
		t.Fatal("acme's vCon changed")
	}
}

func concurrentStores(t *testing.T, e *testenv.Env) {
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	stored := make(chan [2]string, 256)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 8; i++ {
				u := ids.NewRandom().String()
				body := NewVcon(u, "concurrent", "+15555550100")
				req, _ := http.NewRequest("POST", e.BaseURL+"/vcons", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+k.Token)
				req.Header.Set("Content-Type", "application/vcon")
				resp, err := e.Client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 201 {
					errs <- fmt.Errorf("status %d", resp.StatusCode)
					return
				}
				stored <- [2]string{u, string(body)}
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(stored)
	for err := range errs {
		t.Fatal(err)
	}
	n := 0
	for s := range stored {
		got := e.Do("GET", "/vcons/"+s[0], k.Token, nil)
		if string(got.Body) != s[1] {
			t.Fatalf("%s reads back differently", s[0])
		}
		n++
	}
	if n != 128 {
		t.Fatalf("%d stored", n)
	}
}

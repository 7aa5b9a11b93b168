package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/config"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/promtext"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// stored is a vCon a test stored and the version the server gave it.
type stored struct {
	uuid, version string
	body          []byte
}

func storeOne(t *testing.T, e *testenv.Env, token, subject string) stored {
	t.Helper()
	u := ids.NewRandom().String()
	body := apitest.NewVcon(u, subject, "+15555550100")
	r := e.Do("POST", "/vcons", token, body, "Content-Type", "application/vcon")
	if r.Status != 201 {
		t.Fatalf("POST %s: %d %s", subject, r.Status, r.Body)
	}
	var got struct{ Version string }
	r.JSON(t, &got)
	return stored{uuid: u, version: got.Version, body: body}
}

// readOnly opens a SQLite file without changing it (no -wal, no -shm).
func readOnly(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?"+url.Values{"mode": {"ro"}, "immutable": {"1"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func hasKey(t *testing.T, db *sql.DB, version string) bool {
	t.Helper()
	id, err := ids.Parse(version)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM versions WHERE id = ? AND wrapped_key IS NOT NULL`, id[:]).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// TestBackupRestore is the restore the docs describe, on the data
// directory and on a bucket: A and B stored, a backup taken while the
// server serves, B deleted with retention 0d (purged, its tombstone
// written), the server stopped, the backup copied over catalog.db, the
// server started: the restored catalog still held B's key, and start-up
// recovery destroys it again from the tombstone, so B stays unreadable
// while A reads back.
func TestBackupRestore(t *testing.T) {
	t.Run("dir", func(t *testing.T) { backupRestore(t, "") })
	t.Run("versitygw", func(t *testing.T) {
		srv := s3test.Start(t, "versitygw")
		backupRestore(t, srv.StorageTOML(t, srv.NewBucket(t, false), "site/"))
	})
}

func backupRestore(t *testing.T, storage string) {
	e := testenv.New(t, testenv.Options{Retention: "0d", Storage: storage})
	k := e.NewKey(e.Tenant("acme"), "write", "read", "delete")
	a := storeOne(t, e, k.Token, "kept")
	b := storeOne(t, e, k.Token, "purged after the backup")

	backup := filepath.Join(t.TempDir(), "catalog-backup.db")
	var info struct {
		To       string
		Bytes    int64
		Versions int
		Tenants  int
	}
	out := e.CLI("backup", "--to", backup)
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("backup printed %q: %v", out, err)
	}
	fi, err := os.Stat(backup)
	if err != nil {
		t.Fatal(err)
	}
	if info.To != backup || info.Bytes != fi.Size() || info.Versions != 2 || info.Tenants != 1 {
		t.Fatalf("backup printed %s; the file has %d bytes", out, fi.Size())
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("the backup has mode %04o; it holds wrapped keys and must be 0600", fi.Mode().Perm())
	}
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(backup), ".*"))
	if len(leftovers) > 0 {
		t.Fatalf("backup left %v beside the copy", leftovers)
	}
	if !hasKey(t, readOnly(t, backup), b.version) {
		t.Fatal("the backup does not hold B's key: the test proves nothing")
	}

	if r := e.Do("DELETE", "/vcons/"+b.uuid, k.Token, nil); r.Status != 204 {
		t.Fatalf("DELETE B: %d %s", r.Status, r.Body)
	}
	if e.Count("purged") != 1 {
		t.Fatalf("%d tombstones after the 0d delete, want 1", e.Count("purged"))
	}
	e.Stop()

	// The restore of docs/check-and-recovery.md: the backup over catalog.db,
	// without the old catalog's -wal and -shm.
	catPath := filepath.Join(e.Config.DataDir, "catalog.db")
	for _, p := range []string{catPath + "-wal", catPath + "-shm"} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(catPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if !hasKey(t, readOnly(t, catPath), b.version) {
		t.Fatal("the restored catalog does not hold B's key before the start")
	}

	e.Start()
	if !strings.Contains(e.Log.String(), "keys_destroyed_again=1") {
		t.Fatalf("start-up recovery did not report destroying B's key again:\n%s", e.Log.String())
	}
	if r := e.Do("GET", "/vcons/"+b.uuid, k.Token, nil); r.Status != 404 {
		t.Fatalf("B, purged after the backup, reads %d after the restore", r.Status)
	}
	if r := e.Do("GET", "/vcons/"+a.uuid, k.Token, nil); r.Status != 200 || !bytes.Equal(r.Body, a.body) {
		t.Fatalf("A reads %d after the restore", r.Status)
	}
	e.Stop()
	if hasKey(t, readOnly(t, catPath), b.version) {
		t.Fatal("B's key is still in the catalog after the start")
	}
	if out := e.CLI("check", "--deep"); !strings.Contains(out, `"versions":1,`) || !strings.Contains(out, `"damaged":[],"problems":[]`) {
		t.Fatalf("check after the restore: %s", out)
	}
}

// TestBackupRefusals: an existing file is never overwritten, a missing
// folder is named, and --to is required.
func TestBackupRefusals(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	dir := t.TempDir()
	existing := filepath.Join(dir, "old.db")
	if err := os.WriteFile(existing, []byte("an older backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"backup", "--to", existing}, "already exists, and backup never overwrites a file"},
		{[]string{"backup", "--to", filepath.Join(dir, "no", "such", "x.db")}, "does not exist; create it first"},
		{[]string{"backup"}, "backup needs --to FILE"},
	}
	for _, c := range cases {
		out, errOut, code := e.TryCLI(c.args...)
		if code != 1 || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, out %q, err %q; want %q", c.args, code, out, errOut, c.want)
		}
	}
	if b, _ := os.ReadFile(existing); string(b) != "an older backup" {
		t.Fatal("the existing file was changed")
	}
}

// TestBackupWhileStoring takes backups while clients store: each copy is
// a whole snapshot (SQLite reads it back, its count between the counts
// before and after), and no store fails because of it.
func TestBackupWhileStoring(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	k := e.NewKey(e.Tenant("acme"), "write", "read")
	var mu sync.Mutex
	acked, failed := 0, 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				u := ids.NewRandom().String()
				r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(u, "busy", "+15555550100"), "Content-Type", "application/vcon")
				mu.Lock()
				if r.Status == 201 {
					acked++
				} else {
					failed++
				}
				mu.Unlock()
			}
		}()
	}
	dir := t.TempDir()
	last := -1
	for i := 0; i < 5; i++ {
		time.Sleep(150 * time.Millisecond)
		mu.Lock()
		before := acked
		mu.Unlock()
		path := filepath.Join(dir, fmt.Sprintf("b%d.db", i))
		var info struct{ Versions int }
		json.Unmarshal([]byte(e.CLI("backup", "--to", path)), &info)
		mu.Lock()
		after := acked
		mu.Unlock()
		if info.Versions < before || info.Versions > after+4 || info.Versions < last {
			t.Errorf("backup %d holds %d versions; %d were acknowledged before it and %d after", i, info.Versions, before, after)
		}
		last = info.Versions
		var check string
		readOnly(t, path).QueryRow(`PRAGMA integrity_check`).Scan(&check)
		if check != "ok" {
			t.Errorf("backup %d: integrity_check says %s", i, check)
		}
	}
	close(stop)
	wg.Wait()
	if failed > 0 || acked == 0 {
		t.Fatalf("%d stores acknowledged, %d failed beside the backups", acked, failed)
	}
	var n int
	out := e.CLI("audit", "export", "--admin")
	n = strings.Count(out, `"action":"catalog_backup"`)
	if n != 5 {
		t.Fatalf("the admin log has %d catalog_backup records, want 5:\n%s", n, out)
	}
	t.Logf("5 backups beside %d stores, last one %d versions", acked, last)
}

// setMasterKey points the configuration's master_key at file.
func setMasterKey(t *testing.T, e *testenv.Env, file string) {
	t.Helper()
	text, err := os.ReadFile(e.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(text), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "master_key = ") {
			lines[i] = fmt.Sprintf("master_key = %q", file)
		}
	}
	if err := os.WriteFile(e.ConfigPath, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(e.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	e.Config = cfg
}

func newKeyFile(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i*7 + 3)
	}
	if err := os.WriteFile(path, key, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestMasterKeyRotate rotates the master key of a data directory holding
// current, replaced (hidden) and gzip versions: refused beside a running
// server and for bad key files; cut off by a kill before its commit, after
// which the old key still opens everything; then done, after which the
// real server refuses the old key with the rotation message and, pointed
// at the new key, reads every version back.
func TestMasterKeyRotate(t *testing.T) {
	e := testenv.Prepare(t, testenv.Options{Listen: testenv.FreePort(t), Retention: "30d"})
	k := e.NewKey(e.Tenant("acme"), "write", "read", "delete")
	k2 := e.NewKey(e.Tenant("globex"), "write", "read")
	p := e.StartBinary()
	var all []stored
	for i := 0; i < 20; i++ {
		all = append(all, storeOne(t, e, k.Token, fmt.Sprintf("acme %d", i)))
	}
	for i := 0; i < 5; i++ {
		all = append(all, storeOne(t, e, k2.Token, fmt.Sprintf("globex %d", i)))
	}
	// A replaced version stays kept (hidden) for 30 days: its key rotates too.
	replacement := apitest.NewVcon(all[0].uuid, "replaced", "+15555550101")
	if r := e.Do("PUT", "/vcons/"+all[0].uuid, k.Token, replacement, "Content-Type", "application/vcon"); r.Status != 200 {
		t.Fatalf("PUT: %d", r.Status)
	}
	all[0].body = replacement
	deleted := all[1]
	if r := e.Do("DELETE", "/vcons/"+deleted.uuid, k.Token, nil); r.Status != 204 {
		t.Fatalf("DELETE: %d", r.Status)
	}
	all = append(all[:1], all[2:]...)
	gz := ids.NewRandom().String()
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write(apitest.NewVcon(gz, "gzip", "+15555550102"))
	zw.Close()
	if r := e.Do("POST", "/vcons", k.Token, zb.Bytes(), "Content-Type", "application/vcon+gzip"); r.Status != 201 {
		t.Fatalf("POST gzip: %d %s", r.Status, r.Body)
	}
	tokens := map[string]string{}
	for i, s := range all {
		tokens[s.uuid] = k.Token
		if i >= len(all)-5 {
			tokens[s.uuid] = k2.Token
		}
	}
	readAll := func(when string) {
		t.Helper()
		for _, s := range all {
			if r := e.Do("GET", "/vcons/"+s.uuid, tokens[s.uuid], nil); r.Status != 200 || !bytes.Equal(r.Body, s.body) {
				t.Fatalf("%s: %s reads %d", when, s.uuid, r.Status)
			}
		}
		if r := e.Do("GET", "/vcons/"+gz, k.Token, nil); r.Status != 200 || !bytes.Equal(r.Body, zb.Bytes()) {
			t.Fatalf("%s: the gzip vCon reads %d", when, r.Status)
		}
		if r := e.Do("GET", "/vcons/"+deleted.uuid, k.Token, nil); r.Status != 404 {
			t.Fatalf("%s: the deleted vCon reads %d", when, r.Status)
		}
	}
	readAll("before the rotation")

	newKey := filepath.Join(e.Dir, "master-2.key")
	newKeyFile(t, newKey, 0o400)
	p.Stop()

	loose := filepath.Join(e.Dir, "loose.key")
	newKeyFile(t, loose, 0o644)
	refusals := []struct {
		args []string
		want string
	}{
		{[]string{"master-key", "rotate"}, "master-key rotate needs --new FILE"},
		{[]string{"master-key", "rotate", "--new", filepath.Join(e.Dir, "absent.key")}, "does not exist; make one with"},
		{[]string{"master-key", "rotate", "--new", loose}, "readable by group or others"},
		{[]string{"master-key", "rotate", "--new", filepath.Join(e.Dir, "master.key")}, "holds the same key as the current master key"},
	}
	for _, c := range refusals {
		out, errOut, code := e.TryCLI(c.args...)
		if code != 1 || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, out %q, err %q; want %q", c.args, code, out, errOut, c.want)
		}
	}

	// Killed inside the transaction, every key re-wrapped but not committed.
	cmd := exec.Command(testenv.Binary(t), "master-key", "rotate", "--new", newKey, "--config", e.ConfigPath)
	cmd.Env = append(os.Environ(), crashpoint.EnvVar+"="+crashpoint.RotateBeforeCommit)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("rotate at %s: %v\n%s", crashpoint.RotateBeforeCommit, err, out)
	}
	if out := e.CLI("check", "--deep"); strings.Count(out, `"damaged":[],"problems":[]`) != 2 {
		t.Fatalf("check --deep with the old key after the killed rotation: %s", out)
	}
	p = e.StartBinary()
	readAll("after a rotation killed before its commit")
	p.Stop()

	start := time.Now()
	out := e.CLI("master-key", "rotate", "--new", newKey)
	took := time.Since(start)
	var res struct {
		Rotated int    `json:"rotated"`
		NewKey  string `json:"new_key"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	// The two tenants' keys: their data keys, 25 stored (the deleted one
	// kept hidden for 30 days: its key too), the replacement and the gzip
	// one, hang from them and stay as they are.
	if res.Rotated != 2 || res.NewKey != newKey {
		t.Fatalf("rotate printed %s", out)
	}
	t.Logf("rotated %d keys in %v", res.Rotated, took)
	if b, err := os.ReadFile(filepath.Join(e.Dir, "master.key")); err != nil || len(b) != 32 {
		t.Fatalf("the old key file was touched: %d bytes, %v", len(b), err)
	}
	wal, _ := os.Stat(filepath.Join(e.Config.DataDir, "catalog.db-wal"))
	if wal != nil && wal.Size() != 0 {
		t.Fatalf("the WAL holds %d bytes after the rotation's checkpoint", wal.Size())
	}

	// The old key is refused, by the real binary, saying why.
	serve := exec.Command(testenv.Binary(t), "serve", "--config", e.ConfigPath)
	errOut, err := serve.CombinedOutput()
	if err == nil || !strings.Contains(string(errOut), "a master-key rotation replaced it; set master_key to the new key file") {
		t.Fatalf("serve with the old key after the rotation: %v\n%s", err, errOut)
	}
	if _, errOut, code := e.TryCLI("check"); code != 1 || !strings.Contains(errOut, "a master-key rotation replaced it") {
		t.Fatalf("check with the old key: %d %s", code, errOut)
	}

	setMasterKey(t, e, "master-2.key")
	if out := e.CLI("check", "--deep"); strings.Count(out, `"damaged":[],"problems":[]`) != 2 {
		t.Fatalf("check --deep with the new key: %s", out)
	}
	p = e.StartBinary()
	readAll("after the rotation, with the new key")
	// New stores are wrapped with the new key and read back.
	s := storeOne(t, e, k.Token, "after")
	if r := e.Do("GET", "/vcons/"+s.uuid, k.Token, nil); r.Status != 200 || !bytes.Equal(r.Body, s.body) {
		t.Fatalf("a vCon stored after the rotation reads %d", r.Status)
	}
	p.Stop()
	if out := e.CLI("audit", "export", "--admin"); strings.Count(out, `"action":"master_key_rotate"`) != 1 {
		t.Fatalf("the admin log does not record one rotation:\n%s", out)
	}
}

// TestMetricsScrape scrapes /metrics over real TLS with an operator key,
// parses it with the strict parser, and checks that stores, reads,
// deletes, purges and object-store calls move the counters, and that no
// tenant id, uuid, version or key id appears anywhere in the page.
func TestMetricsScrape(t *testing.T) {
	e := testenv.New(t, testenv.Options{Retention: "0d"})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read", "delete")
	op := e.OperatorKey()
	scrape := func() (promtext.Families, string) {
		t.Helper()
		r := e.Do("GET", "/metrics", op.Token, nil)
		if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
			t.Fatalf("GET /metrics: %d %s", r.Status, r.Header.Get("Content-Type"))
		}
		fams, err := promtext.Parse(bytes.NewReader(r.Body))
		if err != nil {
			t.Fatalf("the page does not parse: %v\n%s", err, r.Body)
		}
		return fams, string(r.Body)
	}
	if r := e.Do("GET", "/metrics", k.Token, nil); r.Status != 403 {
		t.Fatalf("a tenant key scraped /metrics: %d", r.Status)
	}
	if r := e.Do("GET", "/metrics", "", nil); r.Status != 401 {
		t.Fatalf("no key scraped /metrics: %d", r.Status)
	}
	before, _ := scrape()

	var kept []stored
	for i := 0; i < 3; i++ {
		kept = append(kept, storeOne(t, e, k.Token, "metrics"))
	}
	for _, s := range kept[:2] {
		if r := e.Do("GET", "/vcons/"+s.uuid, k.Token, nil); r.Status != 200 {
			t.Fatalf("GET: %d", r.Status)
		}
	}
	if r := e.Do("GET", "/vcons/"+ids.NewRandom().String(), k.Token, nil); r.Status != 404 {
		t.Fatalf("GET a missing vCon: %d", r.Status)
	}
	if r := e.Do("DELETE", "/vcons/"+kept[2].uuid, k.Token, nil); r.Status != 204 {
		t.Fatalf("DELETE: %d", r.Status)
	}
	e.Daemon.Sweep(context.Background())
	after, page := scrape()

	delta := func(name string, labels ...string) float64 {
		a, _ := after.Value(name, labels...)
		b, _ := before.Value(name, labels...)
		return a - b
	}
	size := float64(len(kept[0].body))
	checks := []struct {
		name   string
		labels []string
		min    float64
		max    float64
	}{
		{"vcon_stores_total", nil, 3, 3},
		{"vcon_reads_total", nil, 2, 2},
		{"vcon_purges_total", nil, 1, 1},
		{"vcon_http_request_bytes_total", nil, 3 * size, 3 * size},
		{"vcon_http_response_bytes_total", nil, 2 * size, 2 * size},
		{"vcon_http_requests_total", []string{"route", "POST /vcons", "code", "2xx"}, 3, 3},
		{"vcon_http_requests_total", []string{"route", "GET /vcons/{uuid}", "code", "2xx"}, 2, 2},
		{"vcon_http_requests_total", []string{"route", "GET /vcons/{uuid}", "code", "4xx"}, 1, 1},
		{"vcon_http_requests_total", []string{"route", "DELETE /vcons/{uuid}", "code", "2xx"}, 1, 1},
		{"vcon_http_request_duration_seconds_count", []string{"route", "POST /vcons"}, 3, 3},
		{"vcon_purge_sweeps_total", []string{"outcome", "ok"}, 1, 1},
		// Three objects, then the purge count and one tombstone; two
		// reads; the purge deletes one object and proves it gone with a
		// stat.
		{"vcon_objstore_requests_total", []string{"call", "put", "outcome", "ok"}, 5, 5},
		{"vcon_objstore_requests_total", []string{"call", "get", "outcome", "ok"}, 2, 2},
		{"vcon_objstore_requests_total", []string{"call", "delete", "outcome", "ok"}, 1, 1},
		{"vcon_objstore_requests_total", []string{"call", "stat", "outcome", "not_found"}, 1, 1},
		{"vcon_objstore_requests_total", []string{"call", "put", "outcome", "error"}, 0, 0},
	}
	for _, c := range checks {
		if d := delta(c.name, c.labels...); d < c.min || d > c.max {
			t.Errorf("%s%v moved by %v, want %v..%v", c.name, c.labels, d, c.min, c.max)
		}
	}
	for _, name := range []string{"vcon_pack_runs_total", "vcon_objstore_request_duration_seconds", "vcon_http_request_duration_seconds"} {
		if after[name] == nil {
			t.Errorf("the page has no %s", name)
		}
	}
	if v, ok := after.Value("vcon_pack_runs_total", "outcome", "ok"); !ok || v != 0 {
		t.Errorf("vcon_pack_runs_total{outcome=\"ok\"} = %v (present %v) on a server without Parquet storage", v, ok)
	}
	secret := []string{tenant, k.ID, op.ID, "acme"}
	for _, s := range kept {
		secret = append(secret, s.uuid, s.version)
	}
	for _, s := range secret {
		if strings.Contains(page, s) {
			t.Errorf("the page names %q:\n%s", s, page)
		}
	}
	for _, f := range after {
		for _, s := range f.Samples {
			for name := range s.Labels {
				switch name {
				case "route", "code", "le", "call", "outcome", "tool", "reason": // tool and reason: MCP's fixed words
				default:
					t.Errorf("%s has a label %q outside the fixed set", s.Name, name)
				}
			}
		}
	}
}

package parquet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/duckdbtest"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestSeedScenario follows docs/parquet-storage.md step by step on each
// real S3 server: objects stored before Parquet storage is turned on are
// packed by the first runs; a new vCon is packed into a file of its own and
// merged with the first into a third; it reads back byte for byte; check
// finds nothing damaged; DuckDB reads the files and the newest manifest;
// a 0d purge leaves one file and no object holding the purged uuid.
//
// DuckDB reads copies of the bucket's objects downloaded into a folder
// with the same key layout: the test host cannot download httpfs.
func TestSeedScenario(t *testing.T) {
	duckdbtest.Path(t)
	s3test.ForEach(t, func(t *testing.T, srv *s3test.Server) {
		ctx := context.Background()
		e := testenv.Prepare(t, testenv.Options{Storage: srv.StorageTOML(t, srv.NewBucket(t, false), "")})
		e.Start()
		tenant := e.Tenant("acme")
		recorder := e.NewKey(tenant, "write")
		monitor := e.NewKey(tenant, "read")
		// The earlier pages' vCons: objects in the bucket.
		for i := 0; i < 3; i++ {
			u := ids.NewRandom().String()
			if r := e.Do("POST", "/vcons", recorder.Token, apitest.NewVcon(u, "earlier page", "+15555550100"), "Content-Type", "application/vcon"); r.Status != 201 {
				t.Fatalf("POST: %d %s", r.Status, r.Body)
			}
		}
		s := e.Store()
		if n := countObjects(t, s); n != 3 {
			t.Fatalf("%d objects before Parquet storage", n)
		}

		// Turn Parquet storage on with a pack run every second.
		e.Stop()
		e.WriteConfig(parquetTable(1))
		e.Start()
		files := "tenants/" + tenant + "/parquet/"
		waitFor(t, 30*time.Second, "the objects to be packed", func() bool { return countObjects(t, s) == 0 })
		before := keys(t, s, files)
		if len(before) != 1 || !regexp.MustCompile(`^tenants/`+tenant+`/parquet/date=\d{4}-\d{2}-\d{2}/part-[0-9a-f-]{36}\.parquet$`).MatchString(before[0]) {
			t.Fatalf("files after the first runs: %v", before)
		}

		// Store the page's vCon: a run packs it into a file of its own and
		// merges the date's two small files into a third.
		uuid := ids.NewRandom().String()
		packed := seedVcon(uuid)
		if r := e.Do("POST", "/vcons", recorder.Token, packed, "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("POST: %d %s", r.Status, r.Body)
		}
		waitFor(t, 30*time.Second, "the new object to be packed", func() bool { return countObjects(t, s) == 0 })
		after := keys(t, s, files)
		if len(after) != 3 {
			t.Fatalf("%d files after the second run, want 3: %v", len(after), after)
		}
		line := regexp.MustCompile(`(?m)^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z  INFO vcon_server::serve: pack run files=1 versions=1 failed=0$`)
		waitFor(t, 10*time.Second, "the pack run's log line", func() bool { return line.MatchString(e.Log.String()) })
		for _, l := range strings.Split(e.Log.String(), "\n") {
			if strings.Contains(l, "pack run") && (strings.Contains(l, tenant) || strings.Contains(l, uuid)) {
				t.Fatalf("a pack run's line names a tenant or a uuid: %s", l)
			}
		}

		// It reads back byte for byte, from its row.
		if r := e.Do("GET", "/vcons/"+uuid, monitor.Token, nil); r.Status != 200 || !bytes.Equal(r.Body, packed) {
			t.Fatalf("GET: %d, %d bytes", r.Status, len(r.Body))
		}
		v, err := e.Daemon.Cat.Current(ctx, ids.MustParse(tenant), ids.MustParse(uuid))
		if err != nil || v.Location != "packed" {
			t.Fatalf("the version is %s (%v)", v.Location, err)
		}

		// check finds every packed version's file, at its length.
		e.Stop()
		out := e.CLI("check")
		var found bool
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var rep struct {
				Name    *string
				Damaged []string
				Packed  int
			}
			if json.Unmarshal([]byte(l), &rep) != nil || rep.Name == nil {
				continue
			}
			if *rep.Name != "acme" || len(rep.Damaged) != 0 || rep.Packed != 4 {
				t.Fatalf("check: %s", l)
			}
			found = true
		}
		if !found {
			t.Fatalf("check printed no tenant:\n%s", out)
		}
		e.Start()

		// DuckDB reads the date= folders as DATE and the version as UUID.
		dir := t.TempDir()
		download(t, s, "tenants/"+tenant+"/", dir)
		tdir := filepath.Join(dir, "tenants", tenant)
		got := duckdbtest.Query(t, `SELECT typeof(version) AS version, typeof(date) AS date, count(*) > 0 AS rows
			FROM read_parquet('`+tdir+`/parquet/*/*.parquet', hive_partitioning = true) GROUP BY ALL;`)
		if len(got) != 2 || strings.Join(got[0], ",") != "version,date,rows" || strings.Join(got[1], ",") != "UUID,DATE,true" {
			t.Fatalf("duckdb: %v", got)
		}
		// Through the newest manifest, every live version is in its files.
		manifests := keys(t, s, "tenants/"+tenant+"/manifest/")
		manifest := filepath.Join(dir, filepath.FromSlash(manifests[len(manifests)-1]))
		got = duckdbtest.Query(t, `
			SET VARIABLE files = (SELECT list('`+tdir+`/' || f.path) FROM (SELECT unnest(files) AS f FROM read_json('`+manifest+`')));
			SET VARIABLE live = (SELECT live FROM read_json('`+manifest+`'));
			SELECT count(*) = len(getvariable('live')) AS every_live_version
			FROM read_parquet(getvariable('files'))
			WHERE list_contains(getvariable('live'), replace(version::VARCHAR, '-', ''));`)
		if len(got) != 2 || got[0][0] != "every_live_version" || got[1][0] != "true" {
			t.Fatalf("duckdb through the manifest: %v", got)
		}
		var m archive.Manifest
		if err := json.Unmarshal(get(t, s, manifests[len(manifests)-1]), &m); err != nil || len(m.Live) != 4 || len(m.Files) != 1 {
			t.Fatalf("newest manifest: %+v %v", m, err)
		}

		// A 0d purge: every file is gone, one new file is left, and no
		// object holds the purged uuid.
		var deleter testenv.Key
		if err := json.Unmarshal([]byte(e.CLI("key", "create", "--tenant", tenant, "--scope", "delete", "--label", "parquet-check")), &deleter); err != nil {
			t.Fatal(err)
		}
		if out := e.CLI("tenant", "set-retention", tenant, "0d"); !strings.Contains(out, `"retention":"0d"`) {
			t.Fatalf("set-retention: %s", out)
		}
		if r := e.Do("DELETE", "/vcons/"+uuid, deleter.Token, nil); r.Status != 204 {
			t.Fatalf("DELETE: %d %s", r.Status, r.Body)
		}
		if out := e.CLI("tenant", "set-retention", tenant, "default"); !strings.Contains(out, `"retention":null`) {
			t.Fatalf("set-retention: %s", out)
		}
		for _, k := range after {
			if _, err := s.Stat(ctx, k); !errors.Is(err, objstore.ErrNotFound) {
				t.Fatalf("HEAD of a file the purge deleted: %v", err)
			}
		}
		if left := keys(t, s, files); len(left) != 1 {
			t.Fatalf("%d files after the purge, want 1", len(left))
		}
		for _, k := range keys(t, s, "") {
			if bytes.Contains(get(t, s, k), []byte(uuid)) {
				t.Fatalf("%s holds the purged uuid", k)
			}
		}
		if r := e.Do("GET", "/vcons/"+uuid, monitor.Token, nil); r.Status != 404 {
			t.Fatalf("GET after the purge: %d", r.Status)
		}
		e.Stop()
		checkBucket(t, e, s)
	})
}

package export_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/export"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/s3sig"
	"github.com/vcon-server/vcon-server/test/kit/duckdbtest"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// s3Table is a configuration table naming srv's service and keys.
func s3Table(t *testing.T, srv *s3test.Server, table, extra string) string {
	secret := filepath.Join(t.TempDir(), "s3.secret")
	if err := os.WriteFile(secret, []byte(srv.SecretKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("[%s]\nendpoint = %q\nregion = %q\npath_style = true\naccess_key_id = %q\nsecret_access_key_file = %q\nca_file = %q\n%s",
		table, srv.Endpoint, srv.Region, srv.AccessKey, secret, srv.CAFile, extra)
}

// bucketKeys lists every key of a bucket.
func bucketKeys(t *testing.T, c *s3sig.Client, bucket string) []string {
	t.Helper()
	var keys []string
	if err := c.ListAll(context.Background(), bucket, "", func(o s3sig.Object) error {
		keys = append(keys, o.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// download copies the objects under prefix into a new folder, keys
// without the prefix becoming paths: DuckDB's httpfs extension cannot be
// installed here (no network but the package registries), so DuckDB reads
// the bucket's objects from a local copy made through the S3 client.
func download(t *testing.T, c *s3sig.Client, bucket, prefix string) string {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	for _, key := range bucketKeys(t, c, bucket) {
		rel, ok := strings.CutPrefix(key, prefix)
		if !ok {
			continue
		}
		r, err := c.GetObject(ctx, bucket, key, s3sig.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(rel))
		os.MkdirAll(filepath.Dir(p), 0o700)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(f, r.Body)
		r.Body.Close()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestExportToBucket(t *testing.T) {
	duckdbtest.Path(t)
	srv := s3test.Start(t, "versitygw")
	client := srv.Client(t)
	e := testenv.New(t, testenv.Options{})
	d := storeEveryForm(t, e, "acme", 4)
	e.CLI("tenant", "set-metadata", d.Tenant, "counts")
	want := keptVersions(t, e, d.Tenant)
	e.WriteConfig(s3Table(t, srv, "export.s3", ""))

	bucket := srv.NewBucket(t, false)
	to := "s3://" + bucket + "/daily/"
	r := exportCLI(t, e, "--tenant", "acme", "--to", to)
	if r.To != to || r.Seq != 1 || r.Files != 1 || r.Rows != int64(len(want)) || r.Skipped != 0 || r.Unread != 0 {
		t.Fatalf("export line %+v", r)
	}
	keys := bucketKeys(t, client, bucket)
	m0 := "daily/tenant=" + d.Tenant + "/manifest/00000000000000000001.json"
	if len(keys) != 2 || !partName.MatchString(strings.TrimPrefix(keys[0], "daily/")) || keys[1] != m0 || r.Manifest != strings.TrimPrefix(m0, "daily/") {
		t.Fatalf("bucket keys %v, manifest %s", keys, r.Manifest)
	}

	local := download(t, client, bucket, "daily/")
	m := readManifest(t, local, r.Manifest)
	if m.Rows != r.Rows || len(m.Files) != 1 || m.Files[0].Path != strings.TrimPrefix(keys[0], "daily/") {
		t.Errorf("manifest %+v", m)
	}
	rows := duckdbtest.Query(t, manifestFilesSQL(local, r.Manifest)+`
  SELECT version::VARCHAR, md5(sealed), form FROM read_parquet(getvariable('files')) ORDER BY version`)
	if len(rows)-1 != len(want) {
		t.Fatalf("DuckDB read %d rows, want %d", len(rows)-1, len(want))
	}
	for _, row := range rows[1:] {
		k := want[row[0]]
		if row[1] != k.SealedMD5 || row[2] != k.Form {
			t.Errorf("row %v, want sealed md5 %s and form %s", row, k.SealedMD5, k.Form)
		}
	}
	got := duckdbtest.Run(t, `SELECT typeof(date) AS date_type, count(*) AS versions
  FROM read_parquet(`+sqlString(local+"/tenant=*/date=*/*.parquet")+`, hive_partitioning = true) GROUP BY ALL`)
	if wantOut := fmt.Sprintf("date_type,versions\nDATE,%d\n", len(want)); got != wantOut {
		t.Errorf("the glob query printed:\n%s\nwant:\n%s", got, wantOut)
	}
	if found := grepDir(t, local, clearStrings(t, d)); len(found) > 0 {
		t.Errorf("clear vCon content in the bucket at counts: %v", found)
	}

	// A second export to the same prefix takes the next number.
	if r2 := exportCLI(t, e, "--tenant", "acme", "--to", to); r2.Seq != 2 {
		t.Errorf("second export %+v", r2)
	}
	// A prefix of its own starts at 1; so does the bucket's root.
	if r3 := exportCLI(t, e, "--tenant", "acme", "--to", "s3://"+bucket+"/"); r3.Seq != 1 || r3.To != "s3://"+bucket+"/" {
		t.Errorf("export to the bucket's root %+v", r3)
	}

	t.Run("refusals", func(t *testing.T) {
		versioned := srv.NewBucket(t, true)
		locked := srv.NewLockedBucket(t)
		cases := map[string]string{
			"s3://" + versioned + "/x/":           fmt.Sprintf(`the export cannot use bucket %q: it has versioning Enabled, which keeps a deleted file's bytes as an earlier version, so an export removed from it is not gone; use a bucket whose versioning was never turned on`, versioned),
			"s3://" + locked + "/":                fmt.Sprintf(`the export cannot use bucket %q: it has Object Lock on, which can refuse to delete an export's files, when an export fails or when old exports are removed on the tenant's retention schedule; use a bucket made without Object Lock`, locked),
			"s3://no-such-bucket-" + bucket + "/": fmt.Sprintf(`the export cannot use bucket %q: it does not exist; make it first, without versioning and without Object Lock`, "no-such-bucket-"+bucket),
		}
		for to, want := range cases {
			out, errOut, code := e.TryCLI("export", "parquet", "--tenant", "acme", "--to", to)
			if code != 1 || out != "" || errOut != "vcon-server: "+want+"\n" {
				t.Errorf("--to %s: exit %d, %q, %q; want %q", to, code, out, errOut, want)
			}
		}
		for _, b := range []string{versioned, locked} {
			if keys := bucketKeys(t, client, b); len(keys) != 0 {
				t.Errorf("a refused export wrote %v to %s", keys, b)
			}
		}
	})

	t.Run("race", func(t *testing.T) {
		b := srv.NewBucket(t, false)
		dst, err := export.OpenBucket(context.Background(), client, export.Target{Bucket: b, Prefix: "p/"}, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		raceManifest(t, e, d, dst, func() []string {
			var out []string
			for _, k := range bucketKeys(t, client, b) {
				out = append(out, strings.TrimPrefix(k, "p/"))
			}
			slices.Sort(out)
			return out
		})
	})

	// Without [export.s3], the export uses [storage.s3]'s service and keys
	// (and not its bucket or prefix).
	t.Run("storage.s3", func(t *testing.T) {
		e.WriteConfig(s3Table(t, srv, "storage.s3", "bucket = \"not-this-one\"\n"))
		b := srv.NewBucket(t, false)
		r := exportCLI(t, e, "--tenant", "acme", "--to", "s3://"+b+"/")
		if r.Seq != 1 || r.Rows != int64(len(want)) || len(bucketKeys(t, client, b)) != 2 {
			t.Errorf("export with [storage.s3]'s keys: %+v", r)
		}
	})
}

// With storage.objects = "s3" the versions are objects in the server's
// bucket, and the export reads them from there.
func TestExportFromBucketStorage(t *testing.T) {
	duckdbtest.Path(t)
	srv := s3test.Start(t, "versitygw")
	bucket := srv.NewBucket(t, false)
	e := testenv.New(t, testenv.Options{Storage: "[storage]\nobjects = \"s3\"\n" + s3Table(t, srv, "storage.s3", fmt.Sprintf("bucket = %q\nprefix = \"vcon/\"\n", bucket))})
	d := storeEveryForm(t, e, "acme", 3)
	e.CLI("tenant", "set-metadata", d.Tenant, "form")
	want := keptVersions(t, e, d.Tenant)
	dir := t.TempDir()
	r := exportCLI(t, e, "--tenant", "acme", "--to", dir)
	if r.Rows != int64(len(want)) || r.Unread != 0 {
		t.Fatalf("export line %+v", r)
	}
	rows := duckdbtest.Query(t, manifestFilesSQL(dir, r.Manifest)+`
  SELECT version::VARCHAR, md5(sealed), form, size::VARCHAR FROM read_parquet(getvariable('files')) ORDER BY version`)
	if len(rows)-1 != len(want) {
		t.Fatalf("DuckDB read %d rows, want %d", len(rows)-1, len(want))
	}
	for _, row := range rows[1:] {
		k := want[row[0]]
		if row[1] != k.SealedMD5 || row[2] != k.Form || row[3] != fmt.Sprint(k.Size) {
			t.Errorf("row %v, want sealed md5 %s, form %s, size %d", row, k.SealedMD5, k.Form, k.Size)
		}
	}
}

// Versions packed into Parquet files in the bucket are exported from their
// pack file (one ranged read each), byte for byte as they were stored as
// objects, beside versions that are still objects.
func TestExportPackedVersions(t *testing.T) {
	duckdbtest.Path(t)
	srv := s3test.Start(t, "versitygw")
	bucket := srv.NewBucket(t, false)
	e := testenv.New(t, testenv.Options{Storage: "[storage]\nobjects = \"s3\"\n" +
		s3Table(t, srv, "storage.s3", fmt.Sprintf("bucket = %q\n", bucket)) +
		"[storage.parquet]\npack_interval = 3600\n"})
	d := storeEveryForm(t, e, "acme", 3)
	e.CLI("tenant", "set-metadata", d.Tenant, "counts")
	before := keptVersions(t, e, d.Tenant) // read from the objects, before packing
	ctx := context.Background()
	e.Daemon.PackRun(ctx)
	counts, err := e.Daemon.Cat.CountByLocation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts["packed"] != len(before) {
		t.Fatalf("after a pack run: %v, want all %d versions packed", counts, len(before))
	}
	// One more, which stays an object.
	g := generated{UUID: ids.NewRandom().String(), Subject: "After the pack run", Tel: "+15555550999", Name: "Late Caller", Mailto: "mailto:late@example.com"}
	if r := e.Do("POST", "/vcons", d.Key.Token, g.body(), "Content-Type", "application/vcon"); r.Status != 201 {
		t.Fatalf("POST %d %s", r.Status, r.Body)
	}
	want := keptVersions(t, e, d.Tenant) // the packed ones now read through the archive
	for id, k := range before {
		if want[id].SealedMD5 != k.SealedMD5 {
			t.Errorf("%s: packed bytes differ from the object's", id)
		}
	}

	dir := t.TempDir()
	r := exportCLI(t, e, "--tenant", "acme", "--to", dir)
	if r.Rows != int64(len(want)) || r.Unread != 0 || r.Skipped != 0 {
		t.Fatalf("export line %+v, want %d rows", r, len(want))
	}
	rows := duckdbtest.Query(t, manifestFilesSQL(dir, r.Manifest)+`
  SELECT version::VARCHAR, md5(sealed), coalesce(party_count::VARCHAR, 'NULL') FROM read_parquet(getvariable('files')) ORDER BY version`)
	if len(rows)-1 != len(want) {
		t.Fatalf("DuckDB read %d rows, want %d", len(rows)-1, len(want))
	}
	for _, row := range rows[1:] {
		if k, ok := want[row[0]]; !ok || row[1] != k.SealedMD5 {
			t.Errorf("row %v: want sealed md5 %s", row, k.SealedMD5)
		}
	}
}

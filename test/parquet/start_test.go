package parquet

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/s3sig"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// parquetTOML is a [storage.parquet] table with a pack run every second,
// so that the suite's vCons are packed while it runs.
const parquetTOML = "\n[storage.parquet]\npack_interval = 1\n"

// TestAPIOnParquet runs the whole HTTP suite with Parquet storage on and a
// one-second pack_interval, against each real S3 server.
func TestAPIOnParquet(t *testing.T) {
	s3test.ForEach(t, func(t *testing.T, srv *s3test.Server) {
		apitest.Run(t, func(t *testing.T, opts testenv.Options) *testenv.Env {
			opts.Storage = srv.StorageTOML(t, srv.NewBucket(t, false), "vcon/") + parquetTOML
			return testenv.New(t, opts)
		})
	})
}

// TestParquetStartRefusals: the seed's refusals, word for word.
func TestParquetStartRefusals(t *testing.T) {
	srv := s3test.Start(t, "versitygw")

	t.Run("ObjectLock", func(t *testing.T) {
		// A bucket with Object Lock has versioning on too: Object Lock is
		// the message the operator must see.
		bucket := srv.NewLockedBucket(t)
		e := testenv.Prepare(t, testenv.Options{Storage: srv.StorageTOML(t, bucket, "") + parquetTOML})
		err := e.TryStart()
		want := `the storage cannot be used: bucket "` + bucket + `" has Object Lock on, which can refuse to delete a file a purge rewrote; Parquet storage (storage.parquet) needs a bucket without Object Lock`
		if err == nil || err.Error() != want {
			t.Fatalf("start on a bucket with Object Lock:\n%v\nwant\n%s", err, want)
		}
	})

	for _, status := range []string{s3sig.VersioningEnabled, s3sig.VersioningSuspended} {
		t.Run("Versioning"+status, func(t *testing.T) {
			bucket := srv.NewBucket(t, false)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := srv.Client(t).PutBucketVersioning(ctx, bucket, s3sig.VersioningEnabled); err != nil {
				t.Fatal(err)
			}
			if status == s3sig.VersioningSuspended {
				if err := srv.Client(t).PutBucketVersioning(ctx, bucket, s3sig.VersioningSuspended); err != nil {
					t.Fatal(err)
				}
			}
			// allow_versioning does not apply to Parquet storage.
			toml := srv.StorageTOML(t, bucket, "") + "allow_versioning = true\n" + parquetTOML
			e := testenv.Prepare(t, testenv.Options{Storage: toml})
			err := e.TryStart()
			want := `the storage cannot be used: bucket "` + bucket + `" has versioning ` + status + `, which keeps a deleted file's bytes as an earlier version; Parquet storage (storage.parquet) needs a bucket that was never versioned, and storage.s3.allow_versioning does not apply`
			if err == nil || err.Error() != want {
				t.Fatalf("start on a versioned bucket:\n%v\nwant\n%s", err, want)
			}
		})
	}

	t.Run("PackedWithoutTheTable", func(t *testing.T) {
		bucket := srv.NewBucket(t, false)
		table := "\n[storage.parquet]\npack_interval = 3600\n"
		e := testenv.Prepare(t, testenv.Options{Storage: srv.StorageTOML(t, bucket, "")})
		e.WriteConfig(table)
		e.Start()
		k := e.NewKey(e.Tenant("acme"), "write", "read")
		u := ids.NewRandom().String()
		body := apitest.NewVcon(u, "packed", "+15555550100")
		if r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("POST: %d", r.Status)
		}
		e.Daemon.PackRun(t.Context())
		objects := 0
		e.Store().List(t.Context(), "tenants/", func(info objstore.Info) error {
			if strings.Contains(info.Key, "/objects/") {
				objects++
			}
			return nil
		})
		if objects != 0 {
			t.Fatalf("%d objects after the pack run", objects)
		}
		e.Stop()
		// Only the [storage.parquet] table goes.
		e.WriteConfig("")
		err := e.TryStart()
		want := "1 tenant(s) have versions packed into Parquet files, and the configuration has no [storage.parquet]: without it the server packs no more, and the start no longer refuses a bucket with Object Lock or versioning, either of which keeps the bytes of a pack file that a purge rewrote; put the [storage.parquet] table back, since packed versions cannot be turned back into objects; vcon-server check names the tenants"
		if err == nil || err.Error() != want {
			t.Fatalf("start without the table:\n%v\nwant\n%s", err, want)
		}
		// The other commands neither refuse nor warn.
		if out, errOut, code := e.TryCLI("tenant", "list"); code != 0 || errOut != "" || !strings.Contains(out, "acme") {
			t.Fatalf("tenant list without the table: %d %q %q", code, out, errOut)
		}
		// Put back, it starts, and the version reads from its row.
		e.WriteConfig(table)
		e.Start()
		if r := e.Do("GET", "/vcons/"+u, k.Token, nil); r.Status != 200 || string(r.Body) != string(body) {
			t.Fatalf("GET after the table came back: %d", r.Status)
		}
	})

	t.Run("TableWithoutS3", func(t *testing.T) {
		e := testenv.Prepare(t, testenv.Options{})
		b, err := os.ReadFile(e.ConfigPath)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(e.ConfigPath, append(b, []byte(parquetTOML)...), 0o600); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := e.TryCLI("serve")
		want := "vcon-server: configuration: storage.parquet packs the objects of a bucket, so it needs storage.objects = \"s3\"\n"
		if code != 1 || errOut != want {
			t.Fatalf("serve with [storage.parquet] over a data directory: exit %d\n%q\nwant\n%q", code, errOut, want)
		}
	})
}

// TestFirstPackRunAfterLook: the first pack run starts only once the look
// at every object that follows the start returned ("Pack run", its
// recovery, in docs/FORMAT.md).
func TestFirstPackRunAfterLook(t *testing.T) {
	srv := s3test.Start(t, "versitygw")
	e := testenv.New(t, testenv.Options{Storage: srv.StorageTOML(t, srv.NewBucket(t, false), "") + parquetTable(3600)})
	waitFor(t, time.Minute, "the first pack run", func() bool { return strings.Contains(e.Log.String(), "pack run files=") })
	log := e.Log.String()
	look, pack := strings.Index(log, "storage look "), strings.Index(log, "pack run files=")
	if look < 0 || look > pack {
		t.Fatalf("the first pack run did not wait for the first look:\n%s", log)
	}
}

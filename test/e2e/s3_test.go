package e2e

import (
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestAPIOnS3 runs the whole HTTP suite with storage.objects = "s3"
// against each real S3 server.
func TestAPIOnS3(t *testing.T) {
	s3test.ForEach(t, func(t *testing.T, srv *s3test.Server) {
		apitest.Run(t, func(t *testing.T, opts testenv.Options) *testenv.Env {
			opts.Storage = srv.StorageTOML(t, srv.NewBucket(t, false), "vcon/")
			return testenv.New(t, opts)
		})
	})
}

func TestStartRefusals(t *testing.T) {
	srv := s3test.Start(t, "versitygw")

	t.Run("VersionedBucket", func(t *testing.T) {
		bucket := srv.NewBucket(t, true)
		e := testenv.Prepare(t, testenv.Options{Storage: srv.StorageTOML(t, bucket, "")})
		err := e.TryStart()
		want := `the storage cannot be used: bucket "` + bucket + `" has versioning Enabled, which keeps a deleted object's bytes as an earlier version`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("start on a versioned bucket: %v", err)
		}
		e2 := testenv.Prepare(t, testenv.Options{Storage: srv.StorageTOML(t, bucket, "") + "allow_versioning = true\n"})
		if err := e2.TryStart(); err != nil {
			t.Fatalf("allow_versioning: %v", err)
		}
	})

	t.Run("SecondCatalog", func(t *testing.T) {
		bucket := srv.NewBucket(t, false)
		first := testenv.New(t, testenv.Options{Storage: srv.StorageTOML(t, bucket, "p/")})
		first.Stop()
		second := testenv.Prepare(t, testenv.Options{Storage: srv.StorageTOML(t, bucket, "p/")})
		err := second.TryStart()
		if err == nil || !strings.Contains(err.Error(), "belongs to another catalog") {
			t.Fatalf("a second catalog on a bound prefix: %v", err)
		}
		other := testenv.Prepare(t, testenv.Options{Storage: srv.StorageTOML(t, bucket, "q/")})
		if err := other.TryStart(); err != nil {
			t.Fatalf("another prefix of the same bucket: %v", err)
		}
		first.Start() // the first catalog still starts
	})

	t.Run("ObjectsLeftInTheDataDirectory", func(t *testing.T) {
		e := testenv.New(t, testenv.Options{})
		k := e.NewKey(e.Tenant("acme"), "write")
		u := "0196a0f8-7b2c-7c3e-9d4a-1b2c3d4e5f60"
		if r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(u, "x", "+15555550100"), "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("POST: %d", r.Status)
		}
		e.Stop()
		e.WriteConfig(srv.StorageTOML(t, srv.NewBucket(t, false), ""))
		err := e.TryStart()
		if err == nil || !strings.Contains(err.Error(), "1 version(s) are still objects in the data directory") || !strings.Contains(err.Error(), "storage move-objects") {
			t.Fatalf("start with objects left behind: %v", err)
		}
	})
}

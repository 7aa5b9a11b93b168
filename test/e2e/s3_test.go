package e2e

import (
	"os"
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

	// A secret key file others may read is refused by serve and by every
	// command that reaches the bucket, as the master key file would be.
	t.Run("SecretKeyFileReadableByOthers", func(t *testing.T) {
		e := testenv.Prepare(t, testenv.Options{Storage: srv.StorageTOML(t, srv.NewBucket(t, false), "")})
		secret := e.Config.Storage.S3.SecretAccessKeyFile
		if err := os.Chmod(secret, 0o644); err != nil {
			t.Fatal(err)
		}
		want := "configuration: storage.s3.secret_access_key_file: " + secret + " is readable by group or others (mode 0644); run: chmod 0600 " + secret + " (or 0400)"
		if err := e.TryStart(); err == nil || err.Error() != want {
			t.Fatalf("start:\ngot  %v\nwant %s", err, want)
		}
		if _, errOut, code := e.TryCLI("check"); code == 0 || !strings.Contains(errOut, want) {
			t.Fatalf("check: exit %d: %s\nwant %s", code, errOut, want)
		}
		for _, mode := range []os.FileMode{0o400, 0o600} {
			if err := os.Chmod(secret, mode); err != nil {
				t.Fatal(err)
			}
			if _, errOut, code := e.TryCLI("check"); code != 0 {
				t.Fatalf("check with mode %04o: exit %d: %s", mode, code, errOut)
			}
		}
		e.Start()
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

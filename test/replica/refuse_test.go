package replica

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/s3sig"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// refusal is a [replica] target serve must refuse: its configuration, the
// bucket refused and the setting the refusal names.
type refusal struct{ name, storage, replica, bucket, want string }

// TestVersionedBucketRefused: a versioned bucket keeps a deleted replica
// object's bytes, destroyed keys included, as an earlier version, so it is
// refused for [replica] whatever allow_versioning says, on each S3 server:
// the storage bucket itself (to = "s3"), a [replica.s3] bucket beside
// data-directory storage and beside Parquet storage, and a bucket with
// Object Lock. serve refuses to start, naming the bucket and the setting,
// and nothing is written into the bucket, by serve or by a CLI command.
func TestVersionedBucketRefused(t *testing.T) {
	for _, kind := range s3test.Kinds {
		t.Run(kind, func(t *testing.T) {
			srv := s3test.Start(t, kind)
			allow := "allow_versioning = true\n"
			var cases []refusal
			b := srv.NewBucket(t, true)
			cases = append(cases, refusal{
				"storage bucket", srv.StorageTOML(t, b, "vcon/") + allow, replicaTOML("s3", 1), b, "versioning"})
			b = srv.NewBucket(t, true)
			cases = append(cases, refusal{
				"replica.s3 with data-directory storage", "", replicaTOML("s3", 1) + replicaS3TOML(t, srv, b, "", allow), b, "versioning"})
			b = srv.NewBucket(t, true)
			cases = append(cases, refusal{
				"replica.s3 with Parquet storage", srv.StorageTOML(t, srv.NewBucket(t, false), "vcon/") + parquetTOML, replicaTOML("s3", 0) + replicaS3TOML(t, srv, b, "r/", allow), b, "versioning"})
			b = srv.NewLockedBucket(t)
			cases = append(cases, refusal{
				"replica.s3 with Object Lock", "", replicaTOML("s3", 1) + replicaS3TOML(t, srv, b, "", allow), b, "Object Lock"})
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					// The data directory is made without the replica, so
					// that the refusals below are the first it hears of it.
					e := testenv.Prepare(t, testenv.Options{Storage: c.storage})
					e.WriteConfig(c.replica)
					err := e.TryStart()
					if err == nil {
						t.Fatal("serve started with the replica in a versioned bucket")
					}
					msg := err.Error()
					if !strings.Contains(msg, "replica cannot be used") || !strings.Contains(msg, c.bucket) || !strings.Contains(msg, c.want) {
						t.Errorf("serve's refusal does not say the replica's bucket is refused and why: %v", err)
					}
					if c.want == "versioning" && !strings.Contains(msg, "allow_versioning does not apply") {
						t.Errorf("serve's refusal does not say allow_versioning does not apply: %v", err)
					}
					if out, errOut, code := e.TryCLI("tenant", "create", "acme"); code != 0 && !strings.Contains(errOut, "replica cannot be used") {
						t.Errorf("tenant create with the replica in a versioned bucket: exit %d\n%s\n%s", code, out, errOut)
					}
					if ks := keys(t, bucketStore(t, srv, c.bucket, ""), ""); len(ks) != 0 {
						t.Errorf("the refused bucket holds %d object(s): %v", len(ks), ks)
					}
				})
			}
		})
	}
}

// TestBucketVersionedLater: a replica bucket whose versioning is turned on
// after the server vetted it at start is refused by the next command that
// changes the catalog, with the server stopped: the command says the
// change is in the catalog only and why, and writes nothing into the
// versioned bucket (a segment holds whole rows, wrapped keys included,
// which a versioned bucket would keep forever). The next start refuses
// too.
func TestBucketVersionedLater(t *testing.T) {
	for _, kind := range s3test.Kinds {
		t.Run(kind, func(t *testing.T) {
			srv := s3test.Start(t, kind)
			bucket := srv.NewBucket(t, false)
			e := testenv.New(t, testenv.Options{Storage: replicaTOML("s3", 0) + replicaS3TOML(t, srv, bucket, "", "")})
			token := e.NewKey(e.Tenant("acme"), "write").Token
			if r := e.Do("POST", "/vcons", token, apitest.NewVcon(ids.NewRandom().String(), "before versioning", "+15555550100"), "Content-Type", "application/vcon"); r.Status != 201 {
				t.Fatalf("POST: %d %s", r.Status, r.Body)
			}
			e.Stop()
			s := bucketStore(t, srv, bucket, "")
			before := keys(t, s, "")
			if len(before) == 0 {
				t.Fatal("the replica wrote nothing before versioning was turned on")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := srv.Client(t).PutBucketVersioning(ctx, bucket, s3sig.VersioningEnabled); err != nil {
				t.Fatal(err)
			}
			out, errOut, code := e.TryCLI("tenant", "create", "other")
			if code == 0 || !strings.Contains(errOut, "replica cannot be used") || !strings.Contains(errOut, "versioning") {
				t.Errorf("tenant create once the replica's bucket is versioned: exit %d\n%s\n%s", code, out, errOut)
			}
			if after := keys(t, s, ""); !slices.Equal(before, after) {
				t.Errorf("the command wrote into the versioned bucket: %d objects before, %d after", len(before), len(after))
			}
			if err := e.TryStart(); err == nil || !strings.Contains(err.Error(), "versioning") {
				t.Errorf("serve with the replica's bucket versioned: %v", err)
			}
		})
	}
}

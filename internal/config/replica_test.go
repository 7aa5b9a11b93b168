package config

import (
	"strings"
	"testing"
	"time"
)

const s3Storage = `
[storage]
objects = "s3"
[storage.s3]
endpoint = "https://objects.example.com:9000"
region = "us-east-1"
bucket = "vcon"
prefix = "p/"
access_key_id = "vcon-server"
secret_access_key_file = "/etc/vcon-server/s3.secret"
`

const replicaS3 = `
[replica.s3]
endpoint = "https://backup.example.com"
region = "eu-west-1"
bucket = "vcon-replica"
access_key_id = "vcon-replica"
secret_access_key_file = "/etc/vcon-server/replica.secret"
`

func TestReplica(t *testing.T) {
	for _, c := range []struct {
		name, text string
		check      func(t *testing.T, r *Replica)
		err        string
	}{
		{name: "absent", text: ``, check: func(t *testing.T, r *Replica) {
			if r != nil {
				t.Fatalf("replica %+v without a [replica] table", r)
			}
		}},
		{name: "directory, default lag", text: "[replica]\nto = \"/mnt/other/vcon\"\n", check: func(t *testing.T, r *Replica) {
			if r.To != "/mnt/other/vcon" || r.MaxLag != time.Second || r.S3 != nil {
				t.Fatalf("%+v", r)
			}
		}},
		{name: "the storage bucket", text: s3Storage + "[replica]\nto = \"s3\"\nmax_lag = 0\n", check: func(t *testing.T, r *Replica) {
			if r.To != "s3" || r.MaxLag != 0 || r.S3 == nil || r.S3.Bucket != "vcon" || r.S3.Prefix != "p/" {
				t.Fatalf("%+v %+v", r, r.S3)
			}
		}},
		{name: "a bucket of its own", text: "[replica]\nto = \"s3\"\nmax_lag = 5\n" + replicaS3, check: func(t *testing.T, r *Replica) {
			if r.S3 == nil || r.S3.Bucket != "vcon-replica" || r.MaxLag != 5*time.Second {
				t.Fatalf("%+v %+v", r, r.S3)
			}
		}},
		{name: "s3 without a bucket", text: "[replica]\nto = \"s3\"\n", err: `replica.to = "s3" with storage.objects = "dir" needs a [replica.s3] table`},
		{name: "replica.s3 alone", text: replicaS3, err: `[replica.s3] needs a [replica] table with to = "s3"`},
		{name: "replica.s3 with a directory", text: "[replica]\nto = \"/mnt/x\"\n" + replicaS3, err: `[replica.s3] is used only with replica.to = "s3"`},
		{name: "no to", text: "[replica]\nmax_lag = 1\n", err: "replica.to"},
		{name: "the data directory", text: "data_dir = \"/var/lib/vcon-server\"\n[replica]\nto = \"/var/lib/vcon-server\"\n", err: "another disk than the data directory"},
		{name: "negative lag", text: "[replica]\nto = \"/mnt/x\"\nmax_lag = -1\n", err: "replica.max_lag"},
		{name: "unknown key", text: "[replica]\nto = \"/mnt/x\"\nevery = 3\n", err: "replica.every"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse([]byte(c.text), "/etc/vcon-server/vcon-server.toml")
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, cfg.Replica)
		})
	}
}

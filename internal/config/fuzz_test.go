package config

import (
	"strings"
	"testing"
)

// FuzzParse checks that no file makes Parse panic, that every refusal
// reads as a configuration error, and that what it accepts holds together.
func FuzzParse(f *testing.F) {
	f.Add([]byte(fullExample))
	f.Add([]byte(seedExample))
	f.Add([]byte(s3Table + "[storage.parquet]\npack_interval = 0\n"))
	f.Add([]byte("[storage]\nfoo = 1\n"))
	f.Add([]byte("listen = {a = [1, {b = 2}]}\n[[tls]]\n"))
	f.Add([]byte("max_vcon_size = \"64MiB\"\n[retention]\ndefault = \"30d\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "/etc/vcon-server/vcon-server.toml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "configuration: ") {
				t.Errorf("refusal without the prefix: %v", err)
			}
			return
		}
		if c.MaxVconSize <= 0 || c.Retention.Default < 0 || c.Retention.PurgeInterval <= 0 {
			t.Errorf("accepted impossible values: %+v", c)
		}
		if c.Storage.Objects != "dir" && c.Storage.Objects != "s3" {
			t.Errorf("objects %q", c.Storage.Objects)
		}
		if c.Storage.Objects == "s3" && c.Storage.S3 == nil {
			t.Error("objects = s3 without its table")
		}
		if p := c.Storage.Parquet; p != nil && (c.Storage.Objects != "s3" || p.PackInterval <= 0 || p.PackLimit <= 0 || p.ReaderGrace < 0) {
			t.Errorf("parquet %+v with objects %q", p, c.Storage.Objects)
		}
		for _, s := range []*S3{c.Storage.S3, c.Export.S3} {
			if s != nil && (!strings.HasPrefix(s.Endpoint, "https://") || s.Region == "" || s.AccessKeyID == "" || s.SecretAccessKeyFile == "") {
				t.Errorf("s3 %+v", s)
			}
		}
	})
}

package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fullExample is SPEC §5's example, with [export.s3] filled in.
const fullExample = `
listen = "0.0.0.0:8443"
data_dir = "/var/lib/vcon-server"          # catalog.db, objects/
master_key = "/etc/vcon-server/master.key"
max_vcon_size = "64MiB"
min_free = "1GiB"        # below it stores are refused with 507

[tls]
cert = "/etc/vcon-server/cert.pem"
key = "/etc/vcon-server/key.pem"

[retention]
default = "30d"          # hidden versions kept this long
purge_interval = 60      # seconds between purge sweeps

[storage]
objects = "s3"

[storage.s3]
endpoint = "https://objects.example.com:9000"
region = "us-east-1"
bucket = "vcon"
prefix = ""              # keys live under <prefix>tenants/<tenant id>/...
path_style = true
access_key_id = "vcon-server"
secret_access_key_file = "/etc/vcon-server/s3.secret"
ca_file = "/usr/local/share/vcon-server/s3-ca.pem"
allow_versioning = false

[storage.parquet]        # only with objects = "s3"; see seed 000_…
pack_interval = 300
pack_limit = "16MiB"
reader_grace = 900

[export.s3]              # optional; without it exports use [storage.s3]'s service and keys
endpoint = "https://analytics.example.com"
region = "eu-west-1"
path_style = false
access_key_id = "exporter"
secret_access_key_file = "/etc/vcon-server/export.secret"
ca_file = "/etc/vcon-server/export-ca.pem"
allow_versioning = true

[log]
level = "info"           # never a tenant, a uuid, an object key or vCon content

[lawful_basis]
skew = 120               # seconds a basis holds past its expiration

[mcp]
enabled = true           # POST /mcp for keys with the mcp scope
rate = 60                # tool calls a minute per key
call_timeout = 5         # seconds one call may take
max_result = "128KiB"    # bytes of a vCon one result carries
`

const path = "/etc/vcon-server/vcon-server.toml"

func TestFullExample(t *testing.T) {
	c, err := Parse([]byte(fullExample), path)
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Path:        path,
		Listen:      "0.0.0.0:8443",
		DataDir:     "/var/lib/vcon-server",
		MasterKey:   "/etc/vcon-server/master.key",
		MaxVconSize: 64 << 20,
		MinFree:     MinFree{Bytes: 1 << 30},
		TLS:         TLS{Cert: "/etc/vcon-server/cert.pem", Key: "/etc/vcon-server/key.pem"},
		Retention:   Retention{Default: 30 * 24 * time.Hour, PurgeInterval: time.Minute},
		Storage: Storage{
			Objects: "s3",
			S3: &S3{
				Endpoint:            "https://objects.example.com:9000",
				Region:              "us-east-1",
				Bucket:              "vcon",
				PathStyle:           true,
				AccessKeyID:         "vcon-server",
				SecretAccessKeyFile: "/etc/vcon-server/s3.secret",
				CAFile:              "/usr/local/share/vcon-server/s3-ca.pem",
			},
			Parquet: &Parquet{PackInterval: 300 * time.Second, PackLimit: 16 << 20, ReaderGrace: 900 * time.Second},
		},
		Export: Export{S3: &S3{
			Endpoint:            "https://analytics.example.com",
			Region:              "eu-west-1",
			AccessKeyID:         "exporter",
			SecretAccessKeyFile: "/etc/vcon-server/export.secret",
			CAFile:              "/etc/vcon-server/export-ca.pem",
			AllowVersioning:     true,
		}},
		Log:         Log{Level: "info"},
		AuditLog:    AuditLog{CopyInterval: time.Minute},
		LawfulBasis: LawfulBasis{Skew: 120 * time.Second},
		MCP:         MCP{Enabled: true, Rate: 60, CallTimeout: 5 * time.Second, MaxResult: 128 << 10},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
}

// seedExample is the configuration of seed 000's "Turn Parquet storage on".
const seedExample = `listen = "0.0.0.0:8443"
data_dir = "/var/lib/vcon-server"
master_key = "/etc/vcon-server/master.key"

[tls]
cert = "/etc/vcon-server/cert.pem"
key = "/etc/vcon-server/key.pem"

[storage]
objects = "s3"

[storage.s3]
endpoint = "https://objects.example.com:9000"
region = "us-east-1"
bucket = "vcon"
path_style = true
access_key_id = "vcon-server"
secret_access_key_file = "/etc/vcon-server/s3.secret"
ca_file = "/usr/local/share/vcon-server/s3-ca.pem"

[storage.parquet]
pack_interval = 10
`

func TestSeedExample(t *testing.T) {
	c, err := Parse([]byte(seedExample), path)
	if err != nil {
		t.Fatal(err)
	}
	want := &Parquet{PackInterval: 10 * time.Second, PackLimit: 16 << 20, ReaderGrace: 900 * time.Second}
	if !reflect.DeepEqual(c.Storage.Parquet, want) {
		t.Errorf("parquet %+v, want %+v", c.Storage.Parquet, want)
	}
	if c.Export.S3 != nil {
		t.Errorf("export.s3 without the table: %+v", c.Export.S3)
	}
}

func TestDefaults(t *testing.T) {
	for _, file := range []string{"", "# nothing\n", "[tls]\n[retention]\n[storage]\n[export]\n[log]\n"} {
		c, err := Parse([]byte(file), path)
		if err != nil {
			t.Fatalf("%q: %v", file, err)
		}
		want := Default()
		want.Path = path
		if !reflect.DeepEqual(c, want) {
			t.Errorf("%q: got %+v, want the defaults", file, c)
		}
	}
	d := Default()
	if d.Listen != "0.0.0.0:8443" || d.DataDir != "/var/lib/vcon-server" ||
		d.MasterKey != "/etc/vcon-server/master.key" || d.MaxVconSize != 64<<20 ||
		d.TLS != (TLS{"/etc/vcon-server/cert.pem", "/etc/vcon-server/key.pem"}) ||
		d.Retention != (Retention{30 * 24 * time.Hour, 60 * time.Second}) ||
		d.Storage != (Storage{Objects: "dir"}) || d.Export.S3 != nil || d.Log.Level != "info" ||
		d.AuditLog.CopyInterval != time.Minute {
		t.Errorf("defaults: %+v", d)
	}
	const s3 = `
[storage]
objects = "s3"
[storage.s3]
endpoint = "https://s3.example.com"
region = "r"
bucket = "b"
access_key_id = "k"
secret_access_key_file = "/s"
`
	c, err := Parse([]byte(s3+"[storage.parquet]\n"), path)
	if err != nil {
		t.Fatal(err)
	}
	if want := (S3{Endpoint: "https://s3.example.com", Region: "r", Bucket: "b", AccessKeyID: "k", SecretAccessKeyFile: "/s"}); *c.Storage.S3 != want {
		t.Errorf("s3 defaults: %+v", c.Storage.S3)
	}
	if *c.Storage.Parquet != *DefaultParquet() {
		t.Errorf("an empty [storage.parquet]: %+v", c.Storage.Parquet)
	}
	c, err = Parse([]byte(s3), path)
	if err != nil || c.Storage.Parquet != nil {
		t.Errorf("without [storage.parquet]: %+v, %v", c.Storage.Parquet, err)
	}
}

// s3Table is a valid [storage.s3]; the refusals add or override keys.
const s3Table = `[storage]
objects = "s3"
[storage.s3]
endpoint = "https://s3.example.com:9000"
region = "us-east-1"
bucket = "vcon"
access_key_id = "vcon-server"
secret_access_key_file = "/etc/vcon-server/s3.secret"
`

// withS3 is s3Table with line replacing the key it sets, or added.
func withS3(line string) string {
	key, _, _ := strings.Cut(line, " =")
	var out []string
	replaced := false
	for l := range strings.SplitSeq(s3Table, "\n") {
		if strings.HasPrefix(l, key+" =") {
			if line != key+" = <absent>" {
				out = append(out, line)
			}
			replaced = true
			continue
		}
		out = append(out, l)
	}
	if !replaced {
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

func TestRefusals(t *testing.T) {
	for _, tt := range []struct{ file, want string }{
		// The seed page's texts.
		{"[storage.parquet]\n", `configuration: storage.parquet packs the objects of a bucket, so it needs storage.objects = "s3"`},
		{"[storage]\nobjects = \"dir\"\n[storage.parquet]\npack_interval = 10\n", `configuration: storage.parquet packs the objects of a bucket, so it needs storage.objects = "s3"`},
		{s3Table + "[storage.parquet]\npack_interval = 0\n", "configuration: storage.parquet.pack_interval must be more than 0"},
		{s3Table + "[storage.parquet]\npack_limit = 0\n", "configuration: storage.parquet.pack_limit must be more than 0"},
		{s3Table + "[storage.parquet]\npack_limit = \"0MiB\"\n", "configuration: storage.parquet.pack_limit must be more than 0"},
		{s3Table + "[storage.parquet]\npack_interval = -5\n", "configuration: storage.parquet.pack_interval must be more than 0"},
		{s3Table + "[storage.parquet]\npack_interval = \"5m\"\n", `configuration: storage.parquet.pack_interval must be a whole number of seconds, not "5m"`},
		{s3Table + "[storage.parquet]\npack_interval = 1.5\n", `configuration: storage.parquet.pack_interval must be a whole number of seconds, not 1.5`},
		{"[lawful_basis]\nskew = \"5m\"\n", `configuration: lawful_basis.skew must be a whole number of seconds, not "5m"`},
		{"[lawful_basis]\nskew = -1\n", `configuration: lawful_basis.skew must be 0 or more, not -1`},
		{"lawful_basis = 300\n", `configuration: lawful_basis must be a table, not 300`},
		{"mcp = true\n", `configuration: mcp must be a table, not true`},
		{"[mcp]\nenabled = \"yes\"\n", `configuration: mcp.enabled must be true or false, not "yes"`},
		{"[mcp]\nrate = 0\n", `configuration: mcp.rate must be from 1 to 100000 calls a minute, not 0`},
		{"[mcp]\nrate = \"120/m\"\n", `configuration: mcp.rate must be a whole number of calls a minute, not "120/m"`},
		{"[mcp]\ncall_timeout = 0\n", `configuration: mcp.call_timeout must be more than 0`},
		{"[mcp]\ncall_timeout = 601\n", `configuration: mcp.call_timeout must be at most 600 seconds, not 601`},
		{"[mcp]\nmax_result = 100\n", `configuration: mcp.max_result must be from 4KiB to 16MiB, not 100 bytes`},
		{"[mcp]\nmax_results = 100\n", `configuration: unknown key mcp.max_results`},
		{s3Table + "[storage.parquet]\nreader_grace = -1\n", "configuration: storage.parquet.reader_grace must be 0 or more, not -1"},
		{s3Table + "[storage.parquet]\npack_limit = \"16MB\"\n", `configuration: storage.parquet.pack_limit must be a whole number of bytes, or of KiB, MiB or GiB (powers of 1024), such as "64MiB", not "16MB"`},

		{"[retention]\ndefault = \"30\"\n", `configuration: retention.default must be a number of days such as "30d" or "0d", not "30"`},
		{"[retention]\ndefault = 30\n", `configuration: retention.default must be a number of days such as "30d" or "0d", not 30`},
		{"[retention]\ndefault = \"-1d\"\n", `configuration: retention.default must be a number of days such as "30d" or "0d", not "-1d"`},
		{"[retention]\ndefault = \"1000000d\"\n", `configuration: retention.default must be at most 106751d, not "1000000d"`},
		{"[retention]\npurge_interval = 0\n", "configuration: retention.purge_interval must be more than 0"},
		{"[retention]\npurge_interval = 99999999999\n", "configuration: retention.purge_interval must be at most 9223372036 seconds, not 99999999999"},

		{"max_vcon_size = \"lots\"\n", `configuration: max_vcon_size must be a whole number of bytes, or of KiB, MiB or GiB (powers of 1024), such as "64MiB", not "lots"`},
		{"max_vcon_size = 0\n", "configuration: max_vcon_size must be more than 0"},
		{"max_vcon_size = \"0\"\n", "configuration: max_vcon_size must be more than 0"},
		{"max_vcon_size = -1\n", "configuration: max_vcon_size must be more than 0"},
		{"max_vcon_size = 1.5\n", `configuration: max_vcon_size must be a whole number of bytes, or of KiB, MiB or GiB (powers of 1024), such as "64MiB", not 1.5`},
		{"max_vcon_size = \"99999999999GiB\"\n", `configuration: max_vcon_size must be at most 8 EiB, not "99999999999GiB"`},

		{"listen = \"8443\"\n", `configuration: listen must be host:port such as "0.0.0.0:8443", not "8443"`},
		{"listen = \"localhost:https\"\n", `configuration: listen must be host:port such as "0.0.0.0:8443", not "localhost:https"`},
		{"listen = \"localhost:70000\"\n", `configuration: listen must be host:port such as "0.0.0.0:8443", not "localhost:70000"`},
		{"listen = 8443\n", `configuration: listen must be a string, not 8443`},
		{"listen = {port = 1}\n", `configuration: listen must be a string, not a table`},
		{"data_dir = \"\"\n", "configuration: data_dir must not be empty"},
		{"master_key = true\n", "configuration: master_key must be a string, not true"},
		{"[tls]\ncert = \"\"\n", "configuration: tls.cert must not be empty"},

		{"[storage]\nobjects = \"disk\"\n", `configuration: storage.objects must be "dir" or "s3", not "disk"`},
		{"[storage]\nobjects = \"s3\"\n", `configuration: storage.objects = "s3" needs a [storage.s3] table with endpoint, region, bucket, access_key_id and secret_access_key_file`},
		{withS3("endpoint = <absent>"), "configuration: storage.s3.endpoint must be set"},
		{withS3("region = <absent>"), "configuration: storage.s3.region must be set"},
		{withS3("bucket = <absent>"), "configuration: storage.s3.bucket must be set"},
		{withS3("access_key_id = <absent>"), "configuration: storage.s3.access_key_id must be set"},
		{withS3("secret_access_key_file = <absent>"), "configuration: storage.s3.secret_access_key_file must be set"},
		{withS3(`region = ""`), "configuration: storage.s3.region must not be empty"},
		{withS3(`endpoint = "http://s3.example.com:9000"`), `configuration: storage.s3.endpoint must be an https:// URL, not "http://s3.example.com:9000": requests are signed with UNSIGNED-PAYLOAD, which leaves their bodies to TLS to protect`},
		{withS3(`endpoint = "s3.example.com:9000"`), `configuration: storage.s3.endpoint must be an https:// URL such as "https://objects.example.com:9000", not "s3.example.com:9000"`},
		{withS3(`endpoint = "https://"`), `configuration: storage.s3.endpoint must be an https:// URL such as "https://objects.example.com:9000", not "https://"`},
		{withS3(`endpoint = "https://s3.example.com/vcon"`), `configuration: storage.s3.endpoint must name only the service, such as "https://objects.example.com:9000", not "https://s3.example.com/vcon"`},
		{withS3(`endpoint = "https://user:pw@s3.example.com"`), `configuration: storage.s3.endpoint must name only the service, such as "https://objects.example.com:9000", not "https://user:pw@s3.example.com"`},
		{withS3(`prefix = "/vcon/"`), `configuration: storage.s3.prefix must not start with "/", not "/vcon/"`},
		{withS3(`prefix = "vcon"`), `configuration: storage.s3.prefix must be empty or end with "/", such as "vcon/", not "vcon"`},
		{withS3(`bucket = "a/b"`), `configuration: storage.s3.bucket must be a bucket name, without "/" or spaces, not "a/b"`},
		{withS3(`path_style = "yes"`), `configuration: storage.s3.path_style must be true or false, not "yes"`},
		{"[storage.s3]\nregion = \"r\"\n", "configuration: storage.s3.endpoint must be set"},
		{"[export.s3]\nendpoint = \"http://e\"\n", `configuration: export.s3.endpoint must be an https:// URL, not "http://e": requests are signed with UNSIGNED-PAYLOAD, which leaves their bodies to TLS to protect`},
		{"[export.s3]\nendpoint = \"https://e\"\n", "configuration: export.s3.region must be set"},

		{"[log]\nlevel = \"verbose\"\n", `configuration: log.level must be one of debug, info, warn, error, not "verbose"`},
		{"[log]\nlevel = \"INFO\"\n", `configuration: log.level must be one of debug, info, warn, error, not "INFO"`},

		{"tls = \"/etc/cert.pem\"\n", `configuration: tls must be a table, not "/etc/cert.pem"`},
		{"[[storage]]\n", `configuration: storage must be a table, not an array`},
		{"[storage]\ns3 = 1\n", `configuration: storage.s3 must be a table, not 1`},
	} {
		_, err := Parse([]byte(tt.file), path)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s\ngot  %v\nwant %s", tt.file, err, tt.want)
		}
	}
}

func TestSyntaxError(t *testing.T) {
	_, err := Parse([]byte("listen = \"0.0.0.0:8443\"\n\nlisten 8443\n[tls]\n"), path)
	if err == nil || !strings.HasPrefix(err.Error(), "configuration: "+path+" line 3: ") {
		t.Errorf("got %v, want the file and line 3", err)
	}
}

func TestUnknownKeys(t *testing.T) {
	for _, tt := range []struct{ file, key string }{
		{"foo = 1\n", "foo"},
		{"listen = \"0.0.0.0:1\"\nlisten_addr = \"x\"\n", "listen_addr"},
		{"[tls]\ncert = \"/c\"\nca = \"/ca\"\n", "tls.ca"},
		{"[retention]\ndays = \"30d\"\n", "retention.days"},
		{"[storage]\nfoo = 1\n", "storage.foo"},
		{withS3("secret_access_key = \"hunter2\""), "storage.s3.secret_access_key"},
		{s3Table + "[storage.parquet]\npack_size = 1\n", "storage.parquet.pack_size"},
		{"[export.s3]\nendpoint = \"https://e\"\nbucket = \"b\"\n", "export.s3.bucket"},
		{"[export.s3]\nprefix = \"p/\"\n", "export.s3.prefix"},
		{"[export]\nto = \"s3://b/\"\n", "export.to"},
		{"[log]\nformat = \"json\"\n", "log.format"},
		{"[metrics]\nlisten = \"x\"\n", "metrics"},
		{"[storage.dir]\n", "storage.dir"},
		{"[[hooks]]\nurl = \"x\"\n", "hooks"},
		// The decoder matches names without regard to case; the file may not.
		{"Listen = \"0.0.0.0:1\"\n", "Listen"},
		{"[TLS]\ncert = \"/c\"\n", "TLS"},
		{"[log]\nLevel = \"info\"\n", "log.Level"},
		{"\"ſtorage\" = {}\n", `"ſtorage"`},
	} {
		_, err := Parse([]byte(tt.file), path)
		if want := "configuration: unknown key " + tt.key; err == nil || err.Error() != want {
			t.Errorf("%s\ngot  %v\nwant %s", tt.file, err, want)
		}
	}
}

func TestRelativePaths(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "local.toml")
	os.WriteFile(file, []byte(`
data_dir = "data"
master_key = "keys/master.key"
[tls]
cert = "./cert.pem"
key = "/abs/key.pem"
[storage.s3]
endpoint = "https://localhost:9000"
region = "us-east-1"
bucket = "vcon"
access_key_id = "k"
secret_access_key_file = "../s3.secret"
ca_file = "ca.pem"
[export.s3]
endpoint = "https://localhost:9001"
region = "us-east-1"
access_key_id = "k"
secret_access_key_file = "export.secret"
`), 0o600)
	c, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ got, want string }{
		{c.Path, file},
		{c.DataDir, filepath.Join(dir, "data")},
		{c.MasterKey, filepath.Join(dir, "keys", "master.key")},
		{c.TLS.Cert, filepath.Join(dir, "cert.pem")},
		{c.TLS.Key, "/abs/key.pem"},
		{c.Storage.S3.SecretAccessKeyFile, filepath.Join(filepath.Dir(dir), "s3.secret")},
		{c.Storage.S3.CAFile, filepath.Join(dir, "ca.pem")},
		{c.Export.S3.SecretAccessKeyFile, filepath.Join(dir, "export.secret")},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}

	// A relative configuration path still anchors at its folder.
	t.Chdir(dir)
	c, err = Load("local.toml")
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != filepath.Join(dir, "data") {
		t.Errorf("from a relative path: data_dir %q", c.DataDir)
	}
}

func TestLoadMissing(t *testing.T) {
	file := filepath.Join(t.TempDir(), "absent.toml")
	_, err := Load(file)
	want := "configuration: cannot read " + file + ": no such file or directory (name another file with --config)"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

func TestCheckFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"master.key", "cert.pem", "key.pem", "s3.secret", "ca.pem"} {
		os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600)
	}
	os.Mkdir(filepath.Join(dir, "folder"), 0o700)
	file := filepath.Join(dir, "c.toml")
	base := `master_key = "master.key"
[tls]
cert = "cert.pem"
key = "key.pem"
[storage.s3]
endpoint = "https://localhost:9000"
region = "r"
bucket = "b"
access_key_id = "k"
secret_access_key_file = "s3.secret"
ca_file = "ca.pem"
`
	parse := func(replace ...string) *Config {
		t.Helper()
		c, err := Parse([]byte(strings.NewReplacer(replace...).Replace(base)), file)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if err := parse().CheckFiles(true); err != nil {
		t.Errorf("all files there: %v", err)
	}
	for _, tt := range []struct {
		old, new, want string
		needKey        bool
	}{
		{"master.key", "absent.key", "configuration: master_key: " + dir + "/absent.key cannot be read: no such file or directory", true},
		{"cert.pem", "folder", "configuration: tls.cert: " + dir + "/folder is a folder, not a file", true},
		{"\"key.pem", "\"absent.pem", "configuration: tls.key: " + dir + "/absent.pem cannot be read: no such file or directory", true},
		{"s3.secret", "absent.secret", "configuration: storage.s3.secret_access_key_file: " + dir + "/absent.secret cannot be read: no such file or directory", false},
		{"\"ca.pem", "\"absent-ca.pem", "configuration: storage.s3.ca_file: " + dir + "/absent-ca.pem cannot be read: no such file or directory", false},
	} {
		err := parse(tt.old, tt.new).CheckFiles(tt.needKey)
		if err == nil || err.Error() != tt.want {
			t.Errorf("got  %v\nwant %s", err, tt.want)
		}
	}
	if err := parse("master.key", "absent.key").CheckFiles(false); err != nil {
		t.Errorf("master key checked when not needed: %v", err)
	}
	if os.Geteuid() != 0 {
		os.Chmod(filepath.Join(dir, "key.pem"), 0o200)
		err := parse().CheckFiles(true)
		want := "configuration: tls.key: " + dir + "/key.pem cannot be read: permission denied"
		if err == nil || err.Error() != want {
			t.Errorf("got  %v\nwant %s", err, want)
		}
	}
}

func TestEndpointWrittenAgain(t *testing.T) {
	c, err := Parse([]byte(withS3(`endpoint = "HTTPS://S3.example.com:9000/"`)), path)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Storage.S3.Endpoint; got != "https://S3.example.com:9000" {
		t.Errorf("endpoint %q", got)
	}
}

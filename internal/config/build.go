package config

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/vcon-server/vcon-server/internal/units"
)

// builder checks the raw values one by one and sets them over the
// defaults. The first refusal is kept; the ones after it are not checked
// further, so each helper returns a zero value once err is set.
type builder struct {
	cfg  *Config
	base string // the folder of the file, for relative paths
	err  error
}

func (b *builder) fail(format string, args ...any) {
	if b.err == nil {
		b.err = fmt.Errorf("configuration: "+format, args...)
	}
}

var logLevels = []string{"debug", "info", "warn", "error"}

func (b *builder) build(raw *rawConfig, md *toml.MetaData) {
	c := b.cfg
	if raw.Listen != nil {
		c.Listen = b.listen("listen", raw.Listen)
	}
	if raw.DataDir != nil {
		c.DataDir = b.path("data_dir", raw.DataDir)
	}
	if raw.MasterKey != nil {
		c.MasterKey = b.path("master_key", raw.MasterKey)
	}
	if raw.MaxVconSize != nil {
		c.MaxVconSize = b.size("max_vcon_size", raw.MaxVconSize)
	}
	if raw.MinFree != nil {
		c.MinFree = b.minFree("min_free", raw.MinFree)
	}
	if raw.TLS.Cert != nil {
		c.TLS.Cert = b.path("tls.cert", raw.TLS.Cert)
	}
	if raw.TLS.Key != nil {
		c.TLS.Key = b.path("tls.key", raw.TLS.Key)
	}
	if raw.Retention.Default != nil {
		c.Retention.Default = b.days("retention.default", raw.Retention.Default)
	}
	if raw.Retention.PurgeInterval != nil {
		c.Retention.PurgeInterval = b.seconds("retention.purge_interval", raw.Retention.PurgeInterval, false)
	}

	if raw.Storage.Objects != nil {
		c.Storage.Objects = b.str("storage.objects", raw.Storage.Objects)
		if b.err == nil && c.Storage.Objects != "dir" && c.Storage.Objects != "s3" {
			b.fail(`storage.objects must be "dir" or "s3", not %q`, c.Storage.Objects)
		}
	}
	// [storage.s3] is checked whole even with objects = "dir": storage
	// move-objects reads it before the switch to "s3".
	if md.IsDefined("storage", "s3") {
		s := raw.Storage.S3
		c.Storage.S3 = b.service("storage.s3", s.rawService)
		c.Storage.S3.Bucket = b.bucket("storage.s3.bucket", s.Bucket)
		if s.Prefix != nil {
			c.Storage.S3.Prefix = b.prefix("storage.s3.prefix", s.Prefix)
		}
	} else if c.Storage.Objects == "s3" {
		b.fail(`storage.objects = "s3" needs a [storage.s3] table with endpoint, region, bucket, access_key_id and secret_access_key_file`)
	}
	if md.IsDefined("storage", "parquet") {
		if c.Storage.Objects != "s3" {
			// docs/parquet-storage.md's text, word for word.
			b.fail(`storage.parquet packs the objects of a bucket, so it needs storage.objects = "s3"`)
		}
		p, r := DefaultParquet(), raw.Storage.Parquet
		if r.PackInterval != nil {
			p.PackInterval = b.seconds("storage.parquet.pack_interval", r.PackInterval, false)
		}
		if r.PackLimit != nil {
			p.PackLimit = b.size("storage.parquet.pack_limit", r.PackLimit)
		}
		if r.ReaderGrace != nil {
			p.ReaderGrace = b.seconds("storage.parquet.reader_grace", r.ReaderGrace, true)
		}
		c.Storage.Parquet = p
	}

	if md.IsDefined("export", "s3") {
		c.Export.S3 = b.service("export.s3", raw.Export.S3)
	}

	b.replica(raw, md)
	b.webhooks(raw)
	b.kms(raw, md.IsDefined)
	b.mcp(raw)

	if raw.AuditLog.CopyInterval != nil {
		c.AuditLog.CopyInterval = b.seconds("audit_log.copy_interval", raw.AuditLog.CopyInterval, false)
	}
	if raw.LawfulBasis.Skew != nil {
		c.LawfulBasis.Skew = b.seconds("lawful_basis.skew", raw.LawfulBasis.Skew, true)
	}
	if raw.AuditLog.Name != nil {
		c.AuditLog.Name = b.str("audit_log.name", raw.AuditLog.Name)
		if b.err == nil && (c.AuditLog.Name == "" || strings.ContainsAny(c.AuditLog.Name, " \t\n+") || strings.HasSuffix(c.AuditLog.Name, "/")) {
			b.fail("audit_log.name must be a host name or a schema-less URL without spaces, plus signs or a final slash (vcon.example.com, example.com/vcon), not %q", c.AuditLog.Name)
		}
	}
	if raw.Log.Level != nil {
		c.Log.Level = b.str("log.level", raw.Log.Level)
		if b.err == nil && !slices.Contains(logLevels, c.Log.Level) {
			b.fail("log.level must be one of %s, not %q", strings.Join(logLevels, ", "), c.Log.Level)
		}
	}
}

// replica reads [replica] and [replica.s3].
func (b *builder) replica(raw *rawConfig, md *toml.MetaData) {
	if !md.IsDefined("replica") {
		return
	}
	r := raw.Replica
	if r.To == nil && md.IsDefined("replica", "s3") {
		b.fail(`[replica.s3] needs a [replica] table with to = "s3"`)
		return
	}
	out := &Replica{MaxLag: time.Second}
	if r.MaxLag != nil {
		out.MaxLag = b.seconds("replica.max_lag", r.MaxLag, true)
	}
	to := b.required("replica.to", r.To)
	if b.err != nil {
		return
	}
	switch {
	case to == "s3" && md.IsDefined("replica", "s3"):
		s := b.service("replica.s3", r.S3.rawService)
		s.Bucket = b.bucket("replica.s3.bucket", r.S3.Bucket)
		if r.S3.Prefix != nil {
			s.Prefix = b.prefix("replica.s3.prefix", r.S3.Prefix)
		}
		out.S3 = s
	case to == "s3" && b.cfg.Storage.Objects == "s3":
		s := *b.cfg.Storage.S3
		out.S3 = &s
	case to == "s3":
		b.fail(`replica.to = "s3" with storage.objects = "dir" needs a [replica.s3] table naming the bucket (endpoint, region, bucket, access_key_id, secret_access_key_file)`)
	case md.IsDefined("replica", "s3"):
		b.fail(`[replica.s3] is used only with replica.to = "s3", not %q`, to)
	default:
		out.To = b.path("replica.to", r.To)
		if b.err == nil && out.To == b.cfg.DataDir {
			b.fail("replica.to must be a directory on another disk than the data directory, not the data directory %q", out.To)
		}
		b.cfg.Replica = out
		return
	}
	out.To = "s3"
	b.cfg.Replica = out
}

func (b *builder) str(key string, v any) string {
	s, ok := v.(string)
	if !ok {
		b.fail("%s must be a string, not %s", key, show(v))
	}
	return s
}

// required is a string that must be set and not empty.
func (b *builder) required(key string, v any) string {
	if v == nil {
		b.fail("%s must be set", key)
		return ""
	}
	s := b.str(key, v)
	if b.err == nil && s == "" {
		b.fail("%s must not be empty", key)
	}
	return s
}

// path is a file or folder name; a relative one is taken from the folder
// of the configuration file, not from wherever the command runs.
func (b *builder) path(key string, v any) string {
	p := b.required(key, v)
	if b.err != nil {
		return ""
	}
	if strings.ContainsRune(p, 0) {
		b.fail("%s must not hold a NUL character, not %q", key, p)
		return ""
	}
	if !filepath.IsAbs(p) && b.base != "" {
		p = filepath.Join(b.base, p)
	}
	return p
}

func (b *builder) boolean(key string, v any) bool {
	t, ok := v.(bool)
	if !ok {
		b.fail("%s must be true or false, not %s", key, show(v))
	}
	return t
}

func (b *builder) listen(key string, v any) string {
	s := b.str(key, v)
	if b.err != nil {
		return ""
	}
	_, port, err := net.SplitHostPort(s)
	if err == nil {
		_, err = strconv.ParseUint(port, 10, 16)
	}
	if err != nil {
		b.fail(`%s must be host:port such as "0.0.0.0:8443", not %q`, key, s)
	}
	return s
}

// seconds reads an interval, written as a whole number of seconds.
func (b *builder) seconds(key string, v any, zeroOK bool) time.Duration {
	n, ok := v.(int64)
	switch {
	case !ok:
		b.fail("%s must be a whole number of seconds, not %s", key, show(v))
	case zeroOK && n < 0:
		b.fail("%s must be 0 or more, not %d", key, n)
	case !zeroOK && n <= 0:
		// docs/parquet-storage.md's wording, without the value.
		b.fail("%s must be more than 0", key)
	case n > math.MaxInt64/int64(time.Second):
		b.fail("%s must be at most %d seconds, not %d", key, math.MaxInt64/int64(time.Second), n)
	default:
		return time.Duration(n) * time.Second
	}
	return 0
}

// size reads a size of more than 0 bytes: a string such as "64MiB" or an
// integer number of bytes.
func (b *builder) size(key string, v any) int64 {
	var n int64
	switch v := v.(type) {
	case string:
		var err error
		if n, err = units.Size(v); err != nil {
			b.fail("%s %v", key, err)
			return 0
		}
	case int64:
		n = v
	default:
		b.fail("%s must be %s, not %s", key, units.SizeRule, show(v))
		return 0
	}
	if n <= 0 {
		b.fail("%s must be more than 0", key)
	}
	return n
}

func (b *builder) days(key string, v any) time.Duration {
	s, ok := v.(string)
	if !ok {
		b.fail(`%s must be a number of days such as "30d" or "0d", not %s`, key, show(v))
		return 0
	}
	d, err := units.Days(s)
	if err != nil {
		b.fail("%s %v", key, err)
	}
	return d
}

// service reads the keys [storage.s3] and [export.s3] share.
func (b *builder) service(table string, r rawService) *S3 {
	s := &S3{
		Endpoint:            b.endpoint(table+".endpoint", r.Endpoint),
		Region:              b.required(table+".region", r.Region),
		AccessKeyID:         b.required(table+".access_key_id", r.AccessKeyID),
		SecretAccessKeyFile: b.path(table+".secret_access_key_file", r.SecretAccessKeyFile),
	}
	if r.CAFile != nil {
		s.CAFile = b.path(table+".ca_file", r.CAFile)
	}
	if r.PathStyle != nil {
		s.PathStyle = b.boolean(table+".path_style", r.PathStyle)
	}
	if r.AllowVersioning != nil {
		s.AllowVersioning = b.boolean(table+".allow_versioning", r.AllowVersioning)
	}
	return s
}

const exampleEndpoint = `"https://objects.example.com:9000"`

// endpoint is an S3 service's address. s3sig signs UNSIGNED-PAYLOAD: the
// signature does not cover the body, so only TLS keeps a sealed object
// from being changed or replaced on the way.
func (b *builder) endpoint(key string, v any) string {
	return b.httpsURL(key, v, exampleEndpoint, "requests are signed with UNSIGNED-PAYLOAD, which leaves their bodies to TLS to protect")
}

// httpsURL is a service's https:// address, nothing after the host and
// port; why says what plain HTTP would expose.
func (b *builder) httpsURL(key string, v any, example, why string) string {
	s := b.required(key, v)
	if b.err != nil {
		return ""
	}
	u, err := url.Parse(s)
	switch {
	case err == nil && u.Scheme == "http":
		b.fail("%s must be an https:// URL, not %q: %s", key, s, why)
	case err != nil || u.Scheme != "https" || u.Host == "" || u.Hostname() == "":
		b.fail("%s must be an https:// URL such as %s, not %q", key, example, s)
	case u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		b.fail("%s must name only the service, such as %s, not %q", key, example, s)
	}
	if b.err != nil {
		return ""
	}
	// Written again from its parts: "HTTPS://Host/" becomes "https://Host".
	return "https://" + u.Host
}

func (b *builder) bucket(key string, v any) string {
	s := b.required(key, v)
	if b.err == nil && strings.ContainsAny(s, "/\\ ") {
		b.fail("%s must be a bucket name, without \"/\" or spaces, not %q", key, s)
	}
	return s
}

func (b *builder) prefix(key string, v any) string {
	s := b.str(key, v)
	switch {
	case b.err != nil || s == "":
	case strings.HasPrefix(s, "/"):
		b.fail(`%s must not start with "/", not %q`, key, s)
	case !strings.HasSuffix(s, "/"):
		b.fail(`%s must be empty or end with "/", such as "vcon/", not %q`, key, s)
	}
	return s
}

// show writes a TOML value as the operator wrote it, near enough.
func show(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case time.Time:
		return v.Format(time.RFC3339Nano)
	case map[string]any:
		return "a table"
	case []any, []map[string]any:
		return "an array"
	}
	return fmt.Sprint(v)
}

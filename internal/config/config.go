// Package config reads the server's TOML configuration (docs/configuration.md,
// and docs/parquet-storage.md for [storage.parquet]). The file is decoded over the defaults;
// an unknown key or an impossible value is refused with an error that names
// the key and the value, and that a CLI prints after "vcon-server: ".
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"
)

// DefaultPath is where the CLI looks without --config.
const DefaultPath = "/etc/vcon-server/vcon-server.toml"

// Config is a whole configuration. Paths in it are absolute when the file
// gave them relative: they are resolved against the folder holding the
// file, so a local configuration (make run) can say data_dir = "data".
type Config struct {
	Path        string // the file it came from
	Listen      string // host:port
	DataDir     string
	MasterKey   string
	MaxVconSize int64 // bytes
	MinFree     MinFree
	TLS         TLS
	Retention   Retention
	Storage     Storage
	Export      Export
	Log         Log
	Replica     *Replica // nil when [replica] is absent: the catalog is the only copy of the keys
	Webhooks    Webhooks
	AuditLog    AuditLog
	LawfulBasis LawfulBasis
	MCP         MCP
	KMS         *KMS // nil when [kms] is absent: master_key is the raw key
}

// Replica is where the catalog's sealed replica goes (docs/disaster-recovery.md).
type Replica struct {
	// To is "s3" or an absolute directory. With "s3", S3 is the bucket:
	// [replica.s3] when given, else [storage.s3] with its prefix.
	To     string
	S3     *S3
	MaxLag time.Duration // whole seconds; 0: a write waits until it is replicated
}

// AuditLog names the audit logs (docs/audit-log.md): Name is the first
// part of every log's origin; empty, the first DNS name of the TLS
// certificate. CopyInterval is the least time between two copies of the
// logs to a bucket (one PUT per log and tree level each).
type AuditLog struct {
	Name         string
	CopyInterval time.Duration
}

// LawfulBasis tunes how a lawful basis is applied (docs/lawful-basis.md):
// Skew is how long after its expiration a basis still holds, for the
// clocks of whoever wrote it (the draft's "a few minutes").
type LawfulBasis struct {
	Skew time.Duration // whole seconds
}

// MCP is the endpoint AI assistants read through (docs/mcp.md): off
// unless Enabled; Rate is tool calls a minute per key, CallTimeout bounds
// one call, MaxResult the bytes of a vCon one result carries.
type MCP struct {
	Enabled     bool
	Rate        int
	CallTimeout time.Duration // whole seconds
	MaxResult   int64         // bytes
}

type TLS struct {
	Cert, Key string
}

type Retention struct {
	Default       time.Duration // whole days; 0 purges at once
	PurgeInterval time.Duration // between purge sweeps
}

type Storage struct {
	Objects string   // "dir" or "s3"
	S3      *S3      // nil when [storage.s3] is absent
	Parquet *Parquet // nil when [storage.parquet] is absent: no packing
}

type Export struct {
	// S3 is the service and keys for exports to s3:// URLs; nil means use
	// [storage.s3]'s. Its Bucket and Prefix are empty: they come from the
	// export's --to.
	S3 *S3
}

// S3 is a bucket's service, keys and place.
type S3 struct {
	Endpoint            string // https://host[:port], without a trailing "/"
	Region              string
	Bucket              string
	Prefix              string // "" or ending in "/"
	PathStyle           bool
	AccessKeyID         string
	SecretAccessKeyFile string
	CAFile              string // "" for the system's roots
	AllowVersioning     bool
}

type Parquet struct {
	PackInterval time.Duration
	PackLimit    int64 // bytes: the largest sealed object packed
	ReaderGrace  time.Duration
}

type Log struct {
	Level string // "debug", "info", "warn" or "error"
}

// Default returns the configuration of an empty file.
func Default() *Config {
	return &Config{
		Listen:      "0.0.0.0:8443",
		DataDir:     "/var/lib/vcon-server",
		MasterKey:   "/etc/vcon-server/master.key",
		MaxVconSize: 64 << 20,
		MinFree:     MinFree{Bytes: 1 << 30},
		TLS: TLS{
			Cert: "/etc/vcon-server/cert.pem",
			Key:  "/etc/vcon-server/key.pem",
		},
		Retention: Retention{
			Default:       30 * 24 * time.Hour,
			PurgeInterval: 60 * time.Second,
		},
		Storage:     Storage{Objects: "dir"},
		Log:         Log{Level: "info"},
		AuditLog:    AuditLog{CopyInterval: time.Minute},
		LawfulBasis: LawfulBasis{Skew: 300 * time.Second},
		MCP:         MCP{Rate: 120, CallTimeout: 10 * time.Second, MaxResult: 256 << 10},
	}
}

// DefaultParquet returns the settings of an empty [storage.parquet] table.
func DefaultParquet() *Parquet {
	return &Parquet{
		PackInterval: 300 * time.Second,
		PackLimit:    16 << 20,
		ReaderGrace:  900 * time.Second,
	}
}

// Load reads and parses the file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("configuration: cannot read %s: %w (name another file with --config)", path, err)
		}
		return nil, fmt.Errorf("configuration: cannot read %s: %w", path, err)
	}
	return Parse(data, path)
}

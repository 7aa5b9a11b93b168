package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// The file is decoded into raw tables whose values are left as TOML gave
// them (any), so that each check below can name the key and the value in
// its own words instead of the decoder's Go types. Tables stay structs: the
// decoder marks what they hold as decoded, and whatever it did not mark is
// an unknown key.
type rawConfig struct {
	Listen      any `toml:"listen"`
	DataDir     any `toml:"data_dir"`
	MasterKey   any `toml:"master_key"`
	MaxVconSize any `toml:"max_vcon_size"`
	MinFree     any `toml:"min_free"`
	TLS         struct {
		Cert any `toml:"cert"`
		Key  any `toml:"key"`
	} `toml:"tls"`
	Retention struct {
		Default       any `toml:"default"`
		PurgeInterval any `toml:"purge_interval"`
	} `toml:"retention"`
	Storage struct {
		Objects any   `toml:"objects"`
		S3      rawS3 `toml:"s3"`
		Parquet struct {
			PackInterval any `toml:"pack_interval"`
			PackLimit    any `toml:"pack_limit"`
			ReaderGrace  any `toml:"reader_grace"`
		} `toml:"parquet"`
	} `toml:"storage"`
	Export struct {
		// No bucket or prefix: an export takes them from its --to, so
		// the decoder leaves them undecoded and they are refused.
		S3 rawService `toml:"s3"`
	} `toml:"export"`
	Log struct {
		Level any `toml:"level"`
	} `toml:"log"`
	Replica struct {
		To     any   `toml:"to"`
		MaxLag any   `toml:"max_lag"`
		S3     rawS3 `toml:"s3"`
	} `toml:"replica"`
	Webhooks struct {
		Allow any `toml:"allow"`
	} `toml:"webhooks"`
	AuditLog struct {
		Name         any `toml:"name"`
		CopyInterval any `toml:"copy_interval"`
	} `toml:"audit_log"`
	LawfulBasis struct {
		Skew any `toml:"skew"`
	} `toml:"lawful_basis"`
	MCP struct {
		Enabled     any `toml:"enabled"`
		Rate        any `toml:"rate"`
		CallTimeout any `toml:"call_timeout"`
		MaxResult   any `toml:"max_result"`
	} `toml:"mcp"`
	KMS rawKMS `toml:"kms"`
}

// rawService is what [storage.s3] and [export.s3] share: where the service
// is and how to sign for it.
type rawService struct {
	Endpoint            any `toml:"endpoint"`
	Region              any `toml:"region"`
	PathStyle           any `toml:"path_style"`
	AccessKeyID         any `toml:"access_key_id"`
	SecretAccessKeyFile any `toml:"secret_access_key_file"`
	CAFile              any `toml:"ca_file"`
	AllowVersioning     any `toml:"allow_versioning"`
}

type rawS3 struct {
	rawService
	Bucket any `toml:"bucket"`
	Prefix any `toml:"prefix"`
}

// tables are the keys that must hold a table.
var tables = [][]string{
	{"tls"}, {"retention"}, {"storage"}, {"storage", "s3"}, {"storage", "parquet"},
	{"export"}, {"export", "s3"}, {"log"}, {"replica"}, {"replica", "s3"}, {"webhooks"}, {"lawful_basis"}, {"mcp"},
	{"kms"}, {"kms", "vault"}, {"kms", "awskms"}, {"kms", "command"},
}

// Parse reads a configuration; path names the file in errors and anchors
// its relative paths ("" leaves them relative to the working directory).
func Parse(data []byte, path string) (*Config, error) {
	var raw rawConfig
	md, err := toml.Decode(string(data), &raw)
	if err != nil {
		return nil, decodeError(data, path, err)
	}
	if k := unknownKey(&md); k != "" {
		return nil, fmt.Errorf("configuration: unknown key %s", k)
	}
	base := ""
	if path != "" {
		if abs, err := filepath.Abs(filepath.Dir(path)); err == nil {
			base = abs
		} else {
			base = filepath.Dir(path)
		}
	}
	b := &builder{cfg: Default(), base: base}
	b.cfg.Path = path
	b.build(&raw, &md)
	if b.err != nil {
		return nil, b.err
	}
	return b.cfg, nil
}

// unknownKey returns the first key, in the order of the file, that the
// decoder left undecoded or matched only by folding case. Keys inside a
// value (listen = {a = 1}) are left to the check of that value, which
// refuses it as a whole.
func unknownKey(md *toml.MetaData) string {
	undecoded := map[string]bool{}
	for _, k := range md.Undecoded() {
		undecoded[k.String()] = true
	}
	isTable := func(k toml.Key) bool {
		if len(k) >= 3 && k[0] == "kms" && k[1] == "tenant" {
			// [kms.tenant], [kms.tenant.NAME] and its provider's table.
			k = append(toml.Key{"kms"}, k[3:]...)
		}
		return slices.ContainsFunc(tables, func(t []string) bool { return slices.Equal(t, k) }) || slices.Equal(k, toml.Key{"kms", "tenant"})
	}
	insideValue := func(k toml.Key) bool {
		for i := 1; i < len(k); i++ {
			if p := k[:i]; !undecoded[p.String()] && !isTable(p) {
				return true
			}
		}
		return false
	}
	for _, k := range md.Keys() {
		if (undecoded[k.String()] || !isKnownName(k)) && !insideValue(k) {
			return k.String()
		}
	}
	return ""
}

// isKnownName guards against the decoder's leniency: it matches a key to a
// field case-insensitively (with Unicode folding: "ſtorage" would reach
// storage), while every name of this file is lower-case ASCII.
func isKnownName(k toml.Key) bool {
	for i, part := range k {
		if i == 2 && k[0] == "kms" && k[1] == "tenant" {
			continue // a tenant's name (checked as one where it is read)
		}
		for _, r := range part {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
				return false
			}
		}
	}
	return true
}

// decodeError words a decoder error for the operator: a syntax error names
// the file and the line; a value where a table belongs names the table.
func decodeError(data []byte, path string, err error) error {
	name := path
	if name == "" {
		name = "the file"
	}
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("configuration: %s line %d: %s", name, pe.Position.Line, pe.Message)
	}
	var m map[string]any
	if _, err := toml.Decode(string(data), &m); err == nil {
		for _, key := range tables {
			if v, ok := lookup(m, key); ok {
				if _, isTable := v.(map[string]any); !isTable {
					return fmt.Errorf("configuration: %s must be a table, not %s", strings.Join(key, "."), show(v))
				}
			}
		}
	}
	return fmt.Errorf("configuration: %s: %s", name, strings.TrimPrefix(err.Error(), "toml: "))
}

func lookup(m map[string]any, key []string) (any, bool) {
	var v any = m
	for _, k := range key {
		t, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = t[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

package config

import (
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// KMS is the [kms] table: the key service that wraps the master key, so
// that the file master_key names holds only the wrapped form
// (docs/keys.md). Exactly one of Vault, AWSKMS and Command is set, the
// one Provider names.
type KMS struct {
	Provider string // "vault", "awskms" or "command"
	// KeyCache is how long a tenant key that a KMS key of the tenant's
	// own wraps stays unwrapped in memory (kms.key_cache, whole seconds,
	// at least 1; 300 unless set): the longest a revocation waits.
	KeyCache time.Duration
	// TenantKeys is where a new tenant's key goes (kms.tenant_keys):
	// "master", under the master key (the default), or "kms", under a key
	// the server makes for it in the service (vault and awskms), which a
	// tenant delete deletes.
	TenantKeys string
	Vault      *Vault
	AWSKMS     *AWSKMS
	Command    *Command
}

// Vault is [kms.vault]: a transit key of HashiCorp Vault or OpenBao.
type Vault struct {
	Address   string // https://host[:port]
	Mount     string // where the transit engine is mounted; "transit"
	Key       string // the transit key's name
	TokenFile string
	CAFile    string // "" for the system's roots
}

// AWSKMS is [kms.awskms]: a symmetric key of AWS KMS, or of a service that
// speaks its JSON API.
type AWSKMS struct {
	Region              string
	KeyID               string // key id, key ARN or alias/...
	Endpoint            string // https://host[:port]; "" for https://kms.<region>.amazonaws.com
	AccessKeyID         string
	SecretAccessKeyFile string
	CAFile              string
}

// Command is [kms.command]: programs that wrap and unwrap, bytes on stdin
// and bytes on stdout (an HSM's own tool, so the binary needs no cgo).
type Command struct {
	Wrap, Unwrap []string // argv; argv[0] an absolute path
}

var kmsProviders = []string{"vault", "awskms", "command"}

type rawKMS struct {
	Provider   any `toml:"provider"`
	KeyCache   any `toml:"key_cache"`
	TenantKeys any `toml:"tenant_keys"`
	Vault      struct {
		Address   any `toml:"address"`
		Mount     any `toml:"mount"`
		Key       any `toml:"key"`
		TokenFile any `toml:"token_file"`
		CAFile    any `toml:"ca_file"`
	} `toml:"vault"`
	AWSKMS struct {
		Region              any `toml:"region"`
		KeyID               any `toml:"key_id"`
		Endpoint            any `toml:"endpoint"`
		AccessKeyID         any `toml:"access_key_id"`
		SecretAccessKeyFile any `toml:"secret_access_key_file"`
		CAFile              any `toml:"ca_file"`
	} `toml:"awskms"`
	Command struct {
		Wrap   any `toml:"wrap"`
		Unwrap any `toml:"unwrap"`
	} `toml:"command"`
}

// kms reads [kms] and the table of its provider. A provider's table
// without provider naming it is refused, so that a half-written setup
// never leaves the master key raw while the operator believes otherwise.
func (b *builder) kms(raw *rawConfig, defined func(key ...string) bool) {
	if !defined("kms") {
		return
	}
	r := raw.KMS
	p := b.required("kms.provider", r.Provider)
	if b.err != nil {
		return
	}
	if !slices.Contains(kmsProviders, p) {
		b.fail(`kms.provider must be one of "vault", "awskms" or "command", not %q`, p)
		return
	}
	for _, other := range kmsProviders {
		if other != p && defined("kms", other) {
			b.fail(`[kms.%s] is set but kms.provider is %q; remove the table or set provider = %q`, other, p, other)
			return
		}
	}
	if !defined("kms", p) {
		b.fail(`kms.provider = %q needs a [kms.%s] table (docs/keys.md)`, p, p)
		return
	}
	k := &KMS{Provider: p, KeyCache: 300 * time.Second}
	if r.KeyCache != nil {
		k.KeyCache = b.seconds("kms.key_cache", r.KeyCache, false)
	}
	k.TenantKeys = "master"
	if r.TenantKeys != nil {
		switch v := b.required("kms.tenant_keys", r.TenantKeys); {
		case v == "master", v == "kms" && p != "command":
			k.TenantKeys = v
		case v == "kms":
			b.fail(`kms.tenant_keys = "kms" needs a provider that makes keys, vault or awskms; with programs of your own, tenant keys go under the master key ("master")`)
		default:
			b.fail(`kms.tenant_keys must be "kms" or "master", not %q`, v)
		}
	}
	switch p {
	case "vault":
		v := r.Vault
		k.Vault = &Vault{
			Address:   b.kmsEndpoint("kms.vault.address", v.Address),
			Mount:     "transit",
			Key:       b.name("kms.vault.key", v.Key),
			TokenFile: b.path("kms.vault.token_file", v.TokenFile),
		}
		if v.Mount != nil {
			k.Vault.Mount = strings.Trim(b.name("kms.vault.mount", v.Mount), "/")
		}
		if v.CAFile != nil {
			k.Vault.CAFile = b.path("kms.vault.ca_file", v.CAFile)
		}
	case "awskms":
		a := r.AWSKMS
		k.AWSKMS = &AWSKMS{
			Region:              b.name("kms.awskms.region", a.Region),
			KeyID:               b.required("kms.awskms.key_id", a.KeyID),
			AccessKeyID:         b.required("kms.awskms.access_key_id", a.AccessKeyID),
			SecretAccessKeyFile: b.path("kms.awskms.secret_access_key_file", a.SecretAccessKeyFile),
		}
		if a.Endpoint != nil {
			k.AWSKMS.Endpoint = b.kmsEndpoint("kms.awskms.endpoint", a.Endpoint)
		}
		if a.CAFile != nil {
			k.AWSKMS.CAFile = b.path("kms.awskms.ca_file", a.CAFile)
		}
	case "command":
		k.Command = &Command{
			Wrap:   b.argv("kms.command.wrap", r.Command.Wrap),
			Unwrap: b.argv("kms.command.unwrap", r.Command.Unwrap),
		}
	}
	if b.err == nil {
		b.cfg.KMS = k
	}
}

// kmsEndpoint is a KMS's address. A KMS answers with key material, so it
// is never read over plain HTTP, loopback included.
func (b *builder) kmsEndpoint(key string, v any) string {
	return b.httpsURL(key, v, `"https://kms.example.com:8200"`, "the KMS answers with the master key, which only TLS keeps from the network")
}

// name is a key name, mount or region: one word of the URL paths and
// headers it goes into.
func (b *builder) name(key string, v any) string {
	s := b.required(key, v)
	if b.err == nil && strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./", r))
	}) {
		b.fail("%s may hold only letters, digits and - _ . /, not %q", key, s)
	}
	return s
}

// argv is a program and its arguments, the program named by an absolute
// path so that what runs does not depend on PATH.
func (b *builder) argv(key string, v any) []string {
	if v == nil {
		b.fail(`%s must be set, such as ["/usr/local/bin/hsm-wrap", "--key", "vcon"]`, key)
		return nil
	}
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		b.fail(`%s must be a program and its arguments, such as ["/usr/local/bin/hsm-wrap", "--key", "vcon"], not %s`, key, show(v))
		return nil
	}
	out := make([]string, len(list))
	for i, item := range list {
		s, ok := item.(string)
		if !ok || strings.ContainsRune(s, 0) {
			b.fail("%s[%d] must be a string without NUL, not %s", key, i, show(item))
			return nil
		}
		out[i] = s
	}
	if !filepath.IsAbs(out[0]) {
		b.fail("%s[0] must be the program's absolute path, not %q", key, out[0])
		return nil
	}
	return out
}

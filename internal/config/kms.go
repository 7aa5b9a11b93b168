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
	// Tenants are the [kms.tenant.NAME] tables: the provider and
	// credentials that reach the own key of the tenant NAME, when they are
	// not [kms]'s own. Their key is the one tenant set-key names.
	Tenants map[string]*KMS
	Vault   *Vault
	AWSKMS  *AWSKMS
	Command *Command
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
	rawProvider
	KeyCache   any                    `toml:"key_cache"`
	TenantKeys any                    `toml:"tenant_keys"`
	Tenant     map[string]rawProvider `toml:"tenant"`
}

// rawProvider is a key service: [kms]'s own, or a tenant's.
type rawProvider struct {
	Provider any `toml:"provider"`
	Vault    struct {
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
	k := b.kmsService("kms", &r.rawProvider, func(key ...string) bool { return defined(append([]string{"kms"}, key...)...) }, true)
	if b.err != nil {
		return
	}
	k.KeyCache = 300 * time.Second
	if r.KeyCache != nil {
		k.KeyCache = b.seconds("kms.key_cache", r.KeyCache, false)
	}
	k.TenantKeys = "master"
	if r.TenantKeys != nil {
		switch v := b.required("kms.tenant_keys", r.TenantKeys); {
		case v == "master", v == "kms" && k.Provider != "command":
			k.TenantKeys = v
		case v == "kms":
			b.fail(`kms.tenant_keys = "kms" needs a provider that makes keys, vault or awskms; with programs of your own, tenant keys go under the master key ("master")`)
		default:
			b.fail(`kms.tenant_keys must be "kms" or "master", not %q`, v)
		}
	}
	for name, t := range r.Tenant {
		prefix := "kms.tenant." + name
		tk := b.kmsService(prefix, &t, func(key ...string) bool { return defined(append([]string{"kms", "tenant", name}, key...)...) }, false)
		if b.err != nil {
			return
		}
		if k.Tenants == nil {
			k.Tenants = map[string]*KMS{}
		}
		k.Tenants[name] = tk
	}
	if b.err == nil {
		b.cfg.KMS = k
	}
}

// kmsService reads one key service at prefix: its provider and that
// provider's table. keyed says the table names its key ([kms]'s); a
// tenant's table must not, since tenant set-key names it.
func (b *builder) kmsService(prefix string, r *rawProvider, defined func(key ...string) bool, keyed bool) *KMS {
	p := b.required(prefix+".provider", r.Provider)
	if b.err != nil {
		return nil
	}
	if !slices.Contains(kmsProviders, p) {
		b.fail(`%s.provider must be one of "vault", "awskms" or "command", not %q`, prefix, p)
		return nil
	}
	for _, other := range kmsProviders {
		if other != p && defined(other) {
			b.fail(`[%s.%s] is set but %s.provider is %q; remove the table or set provider = %q`, prefix, other, prefix, p, other)
			return nil
		}
	}
	if !defined(p) {
		b.fail(`%s.provider = %q needs a [%s.%s] table (docs/keys.md)`, prefix, p, prefix, p)
		return nil
	}
	key := func(name string, v any, read func(string, any) string) string {
		switch {
		case keyed:
			return read(name, v)
		case v != nil:
			b.fail("%s is the tenant's own key, which tenant set-key --kms-key names: remove it here", name)
		}
		return ""
	}
	k := &KMS{Provider: p}
	switch p {
	case "vault":
		v := r.Vault
		k.Vault = &Vault{
			Address:   b.kmsEndpoint(prefix+".vault.address", v.Address),
			Mount:     "transit",
			Key:       key(prefix+".vault.key", v.Key, b.name),
			TokenFile: b.path(prefix+".vault.token_file", v.TokenFile),
		}
		if v.Mount != nil {
			k.Vault.Mount = strings.Trim(b.name(prefix+".vault.mount", v.Mount), "/")
		}
		if v.CAFile != nil {
			k.Vault.CAFile = b.path(prefix+".vault.ca_file", v.CAFile)
		}
	case "awskms":
		a := r.AWSKMS
		k.AWSKMS = &AWSKMS{
			Region:              b.name(prefix+".awskms.region", a.Region),
			KeyID:               key(prefix+".awskms.key_id", a.KeyID, b.required),
			AccessKeyID:         b.required(prefix+".awskms.access_key_id", a.AccessKeyID),
			SecretAccessKeyFile: b.path(prefix+".awskms.secret_access_key_file", a.SecretAccessKeyFile),
		}
		if a.Endpoint != nil {
			k.AWSKMS.Endpoint = b.kmsEndpoint(prefix+".awskms.endpoint", a.Endpoint)
		}
		if a.CAFile != nil {
			k.AWSKMS.CAFile = b.path(prefix+".awskms.ca_file", a.CAFile)
		}
	case "command":
		k.Command = &Command{
			Wrap:   b.argv(prefix+".command.wrap", r.Command.Wrap),
			Unwrap: b.argv(prefix+".command.unwrap", r.Command.Unwrap),
		}
	}
	return k
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

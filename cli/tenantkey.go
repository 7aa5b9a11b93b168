package cli

import (
	"flag"
	"fmt"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/kms"
)

func init() {
	var kmsKey string
	var master bool
	register(&command{
		name: "tenant set-key", args: "TENANT",
		summary: "wrap the tenant's key with a KMS key of the tenant's own (--kms-key KEY), or under the master key again (--master); runs beside the server",
		flags: func(fs *flag.FlagSet) {
			kmsKey, master = "", false
			fs.StringVar(&kmsKey, "kms-key", "", "the tenant's own key in the key service of [kms]: a transit key name for vault, a key id, ARN or alias for awskms")
			fs.BoolVar(&master, "master", false, "wrap the tenant's key under the master key again")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error { return tenantSetKey(e, args[0], kmsKey, master) },
	})
}

// tenantSetKey wraps a tenant's key anew (archive.Archive.SetTenantKMSKey):
// the key stays the same, so the command runs beside a serving server,
// which takes the new wrapping within kms.key_cache.
func tenantSetKey(e *env, tenant, kmsKey string, master bool) error {
	if (kmsKey == "") != master {
		return usageError{"tenant set-key needs --kms-key KEY, the tenant's own key, or --master; vcon-server tenant set-key --help shows its usage"}
	}
	cfg, mk, cat, err := e.keyed(nil)
	if err != nil {
		return err
	}
	defer cat.Close()
	if kmsKey != "" {
		if cfg.KMS == nil {
			return fmt.Errorf("tenant set-key --kms-key needs a [kms] table naming the key service that holds %q (docs/keys.md)", kmsKey)
		}
		if err := kms.ValidKey(cfg.KMS, kmsKey); err != nil {
			return err
		}
	}
	t, err := findTenant(e, cat, tenant)
	if err != nil {
		return err
	}
	a, err := keyArchive(cfg, mk, cat)
	if err != nil {
		return err
	}
	if err := a.SetTenantKMSKey(e.ctx, t.ID, kmsKey, catalog.CLI); err != nil {
		return err
	}
	st, err := a.KeyState(e.ctx, t.ID)
	if err != nil {
		return err
	}
	return e.emit(map[string]any{"tenant": t.ID.String(), "key": st})
}

package cli

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/units"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/server"
)

func init() {
	register(&command{name: "tenant create", args: "NAME", summary: "create a tenant; prints {id, name, metadata, retention}", run: tenantCreate})
	register(&command{name: "tenant list", summary: "list the tenants, one JSON line each", run: tenantList})
	register(&command{name: "tenant show", args: "TENANT", summary: "print one tenant (by id or name)", run: tenantShow})
	register(&command{name: "tenant set-metadata", args: "TENANT LEVEL", summary: "set the metadata level: none, form, times, counts or full", run: tenantSetMetadata})
	register(&command{name: "tenant set-search", args: "TENANT off|parties|parties+subject", summary: "turn the tenant's blind party search on or off; on, the server indexes its kept versions in the background", run: tenantSetSearch})
	register(&command{name: "tenant set-lawful-basis", args: "TENANT off|enforce|require", summary: "set what a store does with a vCon's lawful-basis attachments: off records them, enforce refuses a malformed one, require also a vCon without one", run: tenantSetLawfulBasis})
	var sigCAs listFlag
	var sigEncrypted bool
	register(&command{
		name: "tenant set-signatures", args: "TENANT off|verify|require",
		summary: "set the tenant's signature policy: verify checks every signed vCon's signatures as it arrives, require also refuses unsigned ones (docs/signatures.md)",
		flags: func(fs *flag.FlagSet) {
			sigCAs, sigEncrypted = nil, false
			fs.Var(&sigCAs, "ca", "a PEM file of trust anchors; together they replace the tenant's (repeat for more)")
			fs.BoolVar(&sigEncrypted, "allow-encrypted", false, "under require, store encrypted vCons, which cannot be checked")
		},
		run: func(e *env, fs *flag.FlagSet, args []string) error {
			return tenantSetSignatures(e, args, sigCAs, sigEncrypted)
		},
	})
	register(&command{name: "tenant set-retention", args: "TENANT 30d|0d|default", summary: "set how long hidden versions are kept; default clears the override", run: tenantSetRetention})

	var keyTenant, keyLabel string
	var keyScopes, keyPurposes listFlag
	var keyOperator bool
	register(&command{
		name: "key create", summary: "create an API key; prints {id, tenant, scopes, purposes (a bound key), label, token} (the token is shown once)",
		flags: func(fs *flag.FlagSet) {
			keyTenant, keyLabel, keyScopes, keyPurposes, keyOperator = "", "", nil, nil, false
			fs.StringVar(&keyTenant, "tenant", "", "the tenant (id or name) of a tenant key")
			fs.Var(&keyScopes, "scope", "a scope: write, read, delete, audit or mcp for a tenant key; metrics, tenants, holds, webhooks or log for an operator key, which holds them all without (repeat for more)")
			fs.Var(&keyPurposes, "purpose", "a purpose the tenant key reads for, a word of a-z, 0-9 and _ as vCons' purpose_grants name it (repeat for more; docs/lawful-basis.md)")
			fs.StringVar(&keyLabel, "label", "", "a label saying whose key it is (required)")
			fs.BoolVar(&keyOperator, "operator", false, "an operator key, for the admin API of every tenant and /metrics")
		},
		run: func(e *env, fs *flag.FlagSet, args []string) error {
			return keyCreate(e, keyTenant, keyScopes, keyPurposes, keyLabel, keyOperator)
		},
	})
	var listTenant string
	register(&command{
		name: "key list", summary: "list keys (never their tokens)",
		flags: func(fs *flag.FlagSet) {
			listTenant = ""
			fs.StringVar(&listTenant, "tenant", "", "only this tenant's keys")
		},
		run: func(e *env, fs *flag.FlagSet, args []string) error { return keyList(e, listTenant) },
	})
	register(&command{name: "key revoke", args: "ID", summary: "revoke a key; it is refused from the next request on", run: keyRevoke})

	register(&command{name: "hold set", args: "TENANT UUID", summary: "put a vCon under legal hold: no delete, no purge", run: holdChange(true)})
	register(&command{name: "hold release", args: "TENANT UUID", summary: "release a legal hold", run: holdChange(false)})
	register(&command{name: "hold list", args: "TENANT", summary: "list a tenant's held uuids", run: holdList})

	var auditTenant, since, until string
	var admin bool
	register(&command{
		name: "audit export", summary: "print a tenant's audit log, or the admin log, as JSON lines",
		flags: func(fs *flag.FlagSet) {
			auditTenant, since, until, admin = "", "", "", false
			fs.StringVar(&auditTenant, "tenant", "", "the tenant (id or name)")
			fs.BoolVar(&admin, "admin", false, "the admin log instead of a tenant's")
			fs.StringVar(&since, "since", "", "only records at or after this RFC 3339 time")
			fs.StringVar(&until, "until", "", "only records before this RFC 3339 time")
		},
		run: func(e *env, fs *flag.FlagSet, args []string) error {
			return auditExport(e, auditTenant, admin, since, until)
		},
	})
}

func findTenant(e *env, cat *catalog.Catalog, idOrName string) (catalog.Tenant, error) {
	t, err := cat.FindTenant(e.ctx, idOrName)
	if errors.Is(err, catalog.ErrNotFound) {
		return t, fmt.Errorf("no tenant has the id or name %q; vcon-server tenant list shows them", idOrName)
	}
	return t, err
}

func tenantCreate(e *env, _ *flag.FlagSet, args []string) error {
	if err := server.ValidTenantName(args[0]); err != nil {
		return err
	}
	// The tenant's key is made with it (archive.Archive.NewTenant).
	cfg, mk, cat, err := e.keyed(nil)
	if err != nil {
		return err
	}
	defer cat.Close()
	a, err := keyArchive(cfg, mk, cat)
	if err != nil {
		return err
	}
	t, err := a.NewTenant(e.ctx, args[0], catalog.CLI)
	if errors.Is(err, catalog.ErrNameTaken) {
		return fmt.Errorf("a tenant named %q already exists", args[0])
	}
	if err != nil {
		return err
	}
	return e.emit(server.TenantView(t))
}

func tenantList(e *env, _ *flag.FlagSet, _ []string) error {
	_, cat, err := e.openCatalog()
	if err != nil {
		return err
	}
	defer cat.Close()
	ts, err := cat.Tenants(e.ctx)
	if err != nil {
		return err
	}
	for _, t := range ts {
		if err := e.emit(server.TenantView(t)); err != nil {
			return err
		}
	}
	return nil
}

func tenantShow(e *env, _ *flag.FlagSet, args []string) error {
	return e.withTenant(args[0], func(cat *catalog.Catalog, t catalog.Tenant) error {
		// Without the master key: a key of the tenant's own is tried.
		keys, err := keyArchive(e.opened, nil, cat)
		if err != nil {
			return err
		}
		v, err := server.TenantShown(e.ctx, keys, t, webhookRules(e.opened))
		if err != nil {
			return err
		}
		return e.emit(v)
	})
}

// withTenant opens the catalog and finds the tenant a command names.
func (e *env) withTenant(idOrName string, fn func(*catalog.Catalog, catalog.Tenant) error) error {
	_, cat, err := e.openCatalog()
	if err != nil {
		return err
	}
	defer cat.Close()
	t, err := findTenant(e, cat, idOrName)
	if err != nil {
		return err
	}
	return fn(cat, t)
}

func tenantSetMetadata(e *env, _ *flag.FlagSet, args []string) error {
	level, err := vocab.ParseLevel(args[1])
	if err != nil {
		return err
	}
	return e.withTenant(args[0], func(cat *catalog.Catalog, t catalog.Tenant) error {
		t, err := cat.SetMetadata(e.ctx, t.ID, level, catalog.CLI)
		if err != nil {
			return err
		}
		return e.emit(server.TenantView(t))
	})
}

func tenantSetRetention(e *env, _ *flag.FlagSet, args []string) error {
	var days *int
	if args[1] != "default" {
		d, err := units.ParseDays(args[1])
		if err != nil {
			return fmt.Errorf("%v, or default for the server's", err)
		}
		n := int(d / (24 * time.Hour))
		days = &n
	}
	return e.withTenant(args[0], func(cat *catalog.Catalog, t catalog.Tenant) error {
		t, err := cat.SetRetention(e.ctx, t.ID, days, catalog.CLI)
		if err != nil {
			return err
		}
		return e.emit(server.TenantView(t))
	})
}

func keyCreate(e *env, tenant string, scopes, purposes []string, label string, operator bool) error {
	valid := catalog.Scopes
	if operator {
		valid = catalog.OperatorScopes
	}
	switch {
	case label == "":
		return errors.New("key create needs --label, saying whose key it is")
	case operator && tenant != "":
		return errors.New("an --operator key has no --tenant: it may use the admin API of every tenant")
	case !operator && tenant == "":
		return errors.New("key create needs --tenant T and at least one --scope, or --operator")
	case !operator && len(scopes) == 0:
		return fmt.Errorf("key create needs at least one --scope: %s", strings.Join(catalog.Scopes, ", "))
	}
	// Checked before the catalog is opened, as the scopes are.
	purposes, err := catalog.CheckPurposes(&ids.ID{}, purposes)
	if err != nil {
		return err
	}
	if operator && len(purposes) > 0 {
		return errors.New("an --operator key reads no vCon, so it has no --purpose: give it to a tenant key")
	}
	var clean []string
	for _, s := range scopes {
		if !slices.Contains(valid, s) {
			return fmt.Errorf("unknown scope %q: use %s", s, strings.Join(valid, ", "))
		}
		if !slices.Contains(clean, s) {
			clean = append(clean, s)
		}
	}
	_, cat, err := e.openCatalog()
	if err != nil {
		return err
	}
	defer cat.Close()
	var tid *ids.ID
	if !operator {
		t, err := findTenant(e, cat, tenant)
		if err != nil {
			return err
		}
		tid = &t.ID
	}
	k, token, err := cat.NewBoundKey(e.ctx, tid, clean, purposes, label, catalog.CLI)
	if err != nil {
		return err
	}
	var tenantText *string
	if tid != nil {
		s := tid.String()
		tenantText = &s
	}
	return e.emit(struct {
		ID       string   `json:"id"`
		Tenant   *string  `json:"tenant"`
		Operator bool     `json:"operator"`
		Scopes   []string `json:"scopes"`
		Purposes []string `json:"purposes,omitempty"` // a bound key's; key list shows [] too
		Label    string   `json:"label"`
		Token    string   `json:"token"`
	}{k.ID, tenantText, operator, k.Scopes, k.Purposes, label, token})
}

func keyList(e *env, tenant string) error {
	_, cat, err := e.openCatalog()
	if err != nil {
		return err
	}
	defer cat.Close()
	var tid *ids.ID
	if tenant != "" {
		t, err := findTenant(e, cat, tenant)
		if err != nil {
			return err
		}
		tid = &t.ID
	}
	keys, err := cat.Keys(e.ctx, tid)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := e.emit(server.KeyView(k)); err != nil {
			return err
		}
	}
	return nil
}

func keyRevoke(e *env, _ *flag.FlagSet, args []string) error {
	_, cat, err := e.openCatalog()
	if err != nil {
		return err
	}
	defer cat.Close()
	k, err := cat.Revoke(e.ctx, args[0], catalog.CLI)
	if errors.Is(err, catalog.ErrNotFound) {
		return fmt.Errorf("no key has the id %q; vcon-server key list shows them", args[0])
	}
	if err != nil {
		return err
	}
	return e.emit(server.KeyView(k))
}

func holdChange(held bool) func(*env, *flag.FlagSet, []string) error {
	return func(e *env, _ *flag.FlagSet, args []string) error {
		uuid, err := ids.Parse(args[1])
		if err != nil {
			return fmt.Errorf("%q is not a vCon uuid (36 characters: 8-4-4-4-12 hexadecimal digits)", args[1])
		}
		return e.withTenant(args[0], func(cat *catalog.Catalog, t catalog.Tenant) error {
			if err := cat.Hold(e.ctx, t.ID, uuid, held, catalog.CLI); err != nil {
				return err
			}
			return e.emit(map[string]any{"tenant": t.ID.String(), "uuid": uuid.String(), "held": held})
		})
	}
}

func holdList(e *env, _ *flag.FlagSet, args []string) error {
	return e.withTenant(args[0], func(cat *catalog.Catalog, t catalog.Tenant) error {
		held, err := cat.Holds(e.ctx, t.ID)
		if err != nil {
			return err
		}
		for _, id := range held {
			if err := e.emit(map[string]any{"tenant": t.ID.String(), "uuid": id.String(), "held": true}); err != nil {
				return err
			}
		}
		return nil
	})
}

// parseWindow reads --since/--until; the refusal texts are the ones the
// export page shows.
func parseWindow(since, until string) (time.Time, time.Time, error) {
	return units.ParseWindow(since, until, "--since", "--until")
}

func auditExport(e *env, tenant string, admin bool, since, until string) error {
	if admin == (tenant != "") {
		return errors.New("audit export needs --tenant T, or --admin for the admin log")
	}
	s, u, err := parseWindow(since, until)
	if err != nil {
		return err
	}
	_, cat, err := e.openCatalog()
	if err != nil {
		return err
	}
	defer cat.Close()
	if admin {
		return cat.AdminRecords(e.ctx, s, u, func(r catalog.Record) error { return e.emit(r) })
	}
	t, err := findTenant(e, cat, tenant)
	if err != nil {
		return err
	}
	return cat.AuditRecords(e.ctx, t.ID, s, u, func(r catalog.Record) error { return e.emit(r) })
}

func tenantSetSearch(e *env, _ *flag.FlagSet, args []string) error {
	mode, err := vocab.ParseSearchMode(args[1])
	if err != nil {
		return err
	}
	return e.withTenant(args[0], func(cat *catalog.Catalog, t catalog.Tenant) error {
		t, err := cat.SetSearch(e.ctx, t.ID, mode, catalog.CLI)
		if err != nil {
			return err
		}
		return e.emit(server.TenantView(t))
	})
}

func tenantSetLawfulBasis(e *env, _ *flag.FlagSet, args []string) error {
	mode, err := vocab.ParseLawfulMode(args[1])
	if err != nil {
		return err
	}
	return e.withTenant(args[0], func(cat *catalog.Catalog, t catalog.Tenant) error {
		t, err := cat.SetLawfulMode(e.ctx, t.ID, mode, catalog.CLI)
		if err != nil {
			return err
		}
		return e.emit(server.TenantView(t))
	})
}

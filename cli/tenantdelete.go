package cli

import (
	"errors"
	"flag"
	"fmt"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/server"
)

func init() {
	var confirm string
	register(&command{
		name: "tenant delete", args: "TENANT",
		summary: "remove a tenant for good (server stopped): its key destroyed, its objects and rows deleted; prints the signed receipt (docs/keys.md)",
		flags: func(fs *flag.FlagSet) {
			confirm = ""
			fs.StringVar(&confirm, "confirm", "", "the tenant's name again, as a confirmation (required)")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error { return tenantDelete(e, args[0], confirm) },
	})
}

// tenantDelete runs a tenant's delete to its end, with the server stopped
// (the running server's is DELETE /admin/tenants/{id}). Named by its id, a
// tenant whose delete a crash or a failure cut off is finished.
func tenantDelete(e *env, idOrName, confirm string) error {
	cfg, mk, cat, release, err := e.offline("vcon-server tenant delete")
	if err != nil {
		return err
	}
	defer release()
	r, err := openReplica(e.ctx, cfg, mk, cat, nil, true)
	if err != nil {
		return err
	}
	a, err := openArchive(e.ctx, cfg, mk, cat, parts{replica: r})
	if err != nil {
		return err
	}
	var d catalog.TenantDeletion
	t, err := cat.FindTenant(e.ctx, idOrName)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		id, perr := ids.Parse(idOrName)
		if perr != nil {
			return fmt.Errorf("no tenant has the id or name %q; vcon-server tenant list shows them", idOrName)
		}
		if d, err = a.FinishTenantDelete(e.ctx, id); errors.Is(err, archive.ErrNotFound) {
			return fmt.Errorf("no tenant has the id or name %q; vcon-server tenant list shows them", idOrName)
		}
	case err != nil:
		return err
	default:
		if confirm != t.Name {
			return usageError{fmt.Sprintf("tenant delete destroys every version of the tenant for good; confirm it with --confirm %s (the tenant's name)", t.Name)}
		}
		d, err = a.DeleteTenant(e.ctx, t.ID, catalog.CLI)
	}
	if err != nil {
		return err
	}
	return e.emit(server.DeletionView(d))
}

package cli

import (
	"fmt"
	"os"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/server"
)

// tenantSetSignatures sets a tenant's signature policy; the --ca files,
// when given, replace its trust anchors (docs/signatures.md).
func tenantSetSignatures(e *env, args []string, caFiles []string, allowEncrypted bool) error {
	mode, err := vocab.ParseSignatureMode(args[1])
	if err != nil {
		return err
	}
	var anchors []catalog.Anchor
	for _, f := range caFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		a, err := archive.ParseAnchors(b)
		if err != nil {
			return fmt.Errorf("--ca %s: %v", f, err)
		}
		anchors = append(anchors, a...)
	}
	return e.withTenant(args[0], func(cat *catalog.Catalog, t catalog.Tenant) error {
		t, err := cat.SetSignatures(e.ctx, t.ID, catalog.SignaturePolicy{Mode: mode, AllowEncrypted: allowEncrypted}, anchors, catalog.CLI)
		if err != nil {
			return err
		}
		v, err := server.SignaturesView(e.ctx, cat, t)
		if err != nil {
			return err
		}
		return e.emit(v)
	})
}

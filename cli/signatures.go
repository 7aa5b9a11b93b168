package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/jws"
	"github.com/vcon-server/vcon-server/internal/units"
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

// lapsing is one line of check --signatures: a version whose signer
// needs it signed again before it can no longer be shown genuine.
type lapsing struct {
	Tenant   string `json:"tenant"`
	UUID     string `json:"uuid"`
	Version  string `json:"version"`
	Signer   string `json:"signer"`
	NotAfter string `json:"not_after"`
	Why      string `json:"why"`
}

// checkSignatures lists, tenant by tenant, the kept versions with a
// signer whose certificate expired or expires within the window, or
// whose anchor is no longer one of the tenant's (docs/signatures.md). It
// reads the catalog only, a page at a time.
func checkSignatures(e *env, within string) error {
	window, err := units.ParseDays(within)
	if err != nil {
		return fmt.Errorf("--within: %v", err)
	}
	_, cat, err := e.openCatalog()
	if err != nil {
		return err
	}
	defer cat.Close()
	tenants, err := cat.Tenants(e.ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	for _, t := range tenants {
		anchors, err := cat.Anchors(e.ctx, t.ID)
		if err != nil {
			return err
		}
		held := map[string]bool{}
		for _, a := range anchors {
			held[a.Fingerprint] = true
		}
		for after := (ids.ID{}); ; {
			page, err := cat.SignedVersions(e.ctx, t.ID, after, 1000)
			if err != nil {
				return err
			}
			for _, v := range page {
				if err := emitLapsing(e, t, v, held, now, window); err != nil {
					return err
				}
			}
			if len(page) < 1000 {
				break
			}
			after = page[len(page)-1].ID
		}
	}
	return nil
}

func emitLapsing(e *env, t catalog.Tenant, v catalog.SignedVersion, held map[string]bool, now time.Time, window time.Duration) error {
	var signers []jws.Signer
	if err := json.Unmarshal([]byte(v.Signers), &signers); err != nil {
		return fmt.Errorf("version %s: its signers do not read: %v", v.ID, err)
	}
	for _, s := range signers {
		why := ""
		switch {
		case !s.NotAfter.After(now):
			why = "its certificate has expired"
		case s.NotAfter.Before(now.Add(window)):
			why = "its certificate expires within " + units.FormatDays(window)
		case !held[s.Anchor]:
			why = "its trust anchor is no longer the tenant's"
		}
		if why == "" {
			continue
		}
		l := lapsing{Tenant: t.ID.String(), UUID: v.UUID.String(), Version: v.ID.String(), Signer: s.Fingerprint,
			NotAfter: s.NotAfter.UTC().Format(time.RFC3339), Why: why}
		if err := e.emit(l); err != nil {
			return err
		}
	}
	return nil
}

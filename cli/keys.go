package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/config"
	"github.com/vcon-server/vcon-server/internal/kms"
	"github.com/vcon-server/vcon-server/internal/masterkey"
	"github.com/vcon-server/vcon-server/seal"
)

// keyService is the KMS of [kms], or nil without it: master_key then holds
// the raw key (docs/keys.md).
func keyService(cfg *config.Config) (kms.Wrapper, error) {
	if cfg.KMS == nil {
		return nil, nil
	}
	return kms.New(cfg.KMS)
}

// loadMasterKey reads master_key, through the KMS when [kms] is set: the
// one KMS call a process makes for it.
func loadMasterKey(ctx context.Context, cfg *config.Config) (*seal.MasterKey, masterkey.Wrapped, error) {
	w, err := keyService(cfg)
	if err != nil {
		return nil, masterkey.Wrapped{}, err
	}
	return masterkey.Load(ctx, cfg.MasterKey, w)
}

// boundTo refuses a wrapped key made for another catalog: the check value
// would refuse it too, but this says which file belongs where.
func boundTo(cfg *config.Config, f masterkey.Wrapped, cat *catalog.Catalog) error {
	if f.Catalog.IsZero() || f.Catalog == cat.ID {
		return nil
	}
	return fmt.Errorf("the master key file %s was wrapped for catalog %s, and the data directory %s holds catalog %s; use the key file made for this catalog", cfg.MasterKey, f.Catalog, cfg.DataDir, cat.ID)
}

func init() {
	register(&command{
		name:    "master-key wrap",
		summary: "move the raw master key into the KMS of [kms]: master_key then holds only its wrapped form",
		run:     func(e *env, _ *flag.FlagSet, _ []string) error { return runWrap(e) },
	})
}

// runWrap wraps the raw key master_key holds with the KMS of [kms]; the
// server may run meanwhile (it holds its key in memory) and takes the
// wrapped file at its next start.
func runWrap(e *env) error {
	cfg, err := e.loadConfig()
	if err != nil {
		return err
	}
	if cfg.KMS == nil {
		return fmt.Errorf("master-key wrap needs a [kms] table in %s naming the KMS that is to hold the key (docs/keys.md)", cfg.Path)
	}
	w, err := keyService(cfg)
	if err != nil {
		return err
	}
	cat, err := catalog.Open(e.ctx, cfg.DataDir)
	if err != nil {
		return err
	}
	defer cat.Close()
	check, _, err := cat.KeyCheck(e.ctx)
	if err != nil {
		return err
	}
	rawCopy, err := masterkey.Wrap(e.ctx, cfg.MasterKey, w, cat.ID, check)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "vcon-server: %s now holds the master key wrapped by %s; the raw key is at %s: once serve has started with the wrapped file, destroy it (shred -u %s) and every backup of it, since any copy of the raw key opens the archive without the KMS\n", cfg.MasterKey, w, rawCopy, rawCopy)
	return e.emit(map[string]any{"master_key": cfg.MasterKey, "kms": w.String(), "raw_copy": rawCopy, "catalog_id": cat.ID.String()})
}

// keyServices are the services of [kms] that hold tenants' own keys
// (archive.KeyServices): [kms]'s own, and each [kms.tenant.NAME] table.
type keyServices struct{ cfg *config.KMS }

// newKeyServices is nil without [kms].
func newKeyServices(cfg *config.Config) archive.KeyServices {
	if cfg.KMS == nil {
		return nil
	}
	return keyServices{cfg.KMS}
}

func (s keyServices) ServiceOf(tenant string) string {
	if s.cfg.Tenants[tenant] != nil {
		return tenant
	}
	return ""
}

func (s keyServices) service(name string) (*config.KMS, error) {
	if name == "" {
		return s.cfg, nil
	}
	if c := s.cfg.Tenants[name]; c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("the tenant's own key is reached with [kms.tenant.%s], which the configuration no longer has; put that table back (docs/keys.md)", name)
}

func (s keyServices) Key(service, key string) (kms.Wrapper, error) {
	c, err := s.service(service)
	if err != nil {
		return nil, err
	}
	return kms.ForKey(c, key)
}

func (s keyServices) Admin(service string) (kms.KeyAdmin, error) {
	c, err := s.service(service)
	if err != nil {
		return nil, err
	}
	w, err := kms.New(c)
	if err != nil {
		return nil, err
	}
	if admin, ok := w.(kms.KeyAdmin); ok {
		return admin, nil
	}
	return nil, fmt.Errorf("the key service %s makes and deletes no keys (provider %q): make or delete the tenant's key with the service's own tools", w, c.Provider)
}

// keyArchive is the Archive of the commands that make, wrap or try tenant
// keys and store nothing: tenant create, set-key and show (mk nil: a key
// of the tenant's own is tried, and nothing is made).
func keyArchive(cfg *config.Config, mk *seal.MasterKey, cat *catalog.Catalog) (*archive.Archive, error) {
	return archive.New(archive.Config{Cat: cat, Key: mk, KeyServices: newKeyServices(cfg), KMSTenantKeys: cfg.KMS != nil && cfg.KMS.TenantKeys == "kms"})
}

// watchMasterKey takes the master key that master-key rotate moved the
// catalog to while this server served (docs/check-and-recovery.md): the
// catalog's check value is no longer the key's, and new_key_file names the
// new key's file. Every holder of d.key (the archive, the replica, the
// webhook sender) turns to it at once; the replica then writes a whole
// generation under it. A key that does not open is logged once, and the
// server goes on with what it holds unwrapped until it is restarted with
// master_key set to the new file.
func (d *Daemon) watchMasterKey(ctx context.Context, cfg *config.Config) {
	check, _, err := d.Cat.KeyCheck(ctx)
	if err != nil || bytes.Equal(check, d.key.CheckValue()) {
		return
	}
	name, err := d.Cat.Meta(ctx, "new_key_file")
	if err != nil {
		return
	}
	path := string(name)
	fail := func(err error) {
		if d.keyMiss != path {
			d.keyMiss = path
			d.Log.Error("the master key was rotated, and this server cannot open the new key; set master_key to it and restart", "master_key", path, "error", err.Error())
		}
	}
	w, err := keyService(cfg)
	if err != nil {
		fail(err)
		return
	}
	mk, _, err := masterkey.Load(ctx, path, w)
	if err != nil {
		fail(err)
		return
	}
	if !bytes.Equal(mk.CheckValue(), check) {
		fail(errors.New("the file holds another key than the catalog names"))
		return
	}
	d.key.Replace(mk)
	d.Log.Info("the master key was rotated: serving with the new key; set master_key to it before the next start", "master_key", path)
}

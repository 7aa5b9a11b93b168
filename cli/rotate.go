package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/config"
	"github.com/vcon-server/vcon-server/internal/masterkey"
	"github.com/vcon-server/vcon-server/seal"
)

func init() {
	var newKey string
	register(&command{
		name:    "master-key rotate",
		summary: "re-wrap every tenant key under a new master key in one transaction; a running server takes the new key; then set master_key to the new file",
		flags: func(fs *flag.FlagSet) {
			newKey = ""
			fs.StringVar(&newKey, "new", "", "the new master key file: 32 bytes, raw or base64, mode 0400 or 0600; under [kms], a file that does not exist is made, wrapped by the KMS")
		},
		run: func(e *env, _ *flag.FlagSet, _ []string) error { return runRotate(e, newKey) },
	})
}

// newMasterKey loads the key rotate moves to. Under [kms] a file that
// does not exist yet is made, the new key wrapped by the KMS for this
// catalog: its raw bytes are never written.
func newMasterKey(e *env, cfg *config.Config, cat *catalog.Catalog, path string) (*seal.MasterKey, error) {
	w, err := keyService(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); os.IsNotExist(err) {
		if w == nil {
			return nil, fmt.Errorf("the new master key file %s does not exist; make one with: (umask 077 && head -c 32 /dev/urandom > %s && chmod 0400 %s)", path, path, path)
		}
		if err := masterkey.Create(e.ctx, path, w, cat.ID); err != nil {
			return nil, err
		}
		fmt.Fprintf(e.stderr, "vcon-server: made a new master key, wrapped by %s, at %s\n", w, path)
	}
	mk, wrapped, err := masterkey.Load(e.ctx, path, w)
	if err != nil {
		return nil, err
	}
	return mk, boundTo(cfg, wrapped, cat)
}

// runRotate moves every tenant key from the configured master key to the
// new one; the old key file is never touched. With the server stopped it
// holds the data directory's lock and rolls the replica over itself; a
// serving server takes the new key within a second and rolls its replica
// over (watchMasterKey).
func runRotate(e *env, newPath string) error {
	if newPath == "" {
		return usageError{"master-key rotate needs --new FILE, the new master key file; vcon-server master-key rotate --help shows its usage"}
	}
	abs, err := filepath.Abs(newPath)
	if err != nil {
		return err
	}
	cfg, err := e.loadConfig()
	if err != nil {
		return err
	}
	serving := false
	unlock, err := catalog.Lock(cfg.DataDir)
	switch {
	case errors.Is(err, catalog.ErrLocked):
		serving, unlock = true, func() {}
	case err != nil:
		return err
	}
	defer unlock()
	oldKey, cat, err := openKeyed(e.ctx, cfg)
	if err != nil {
		return err
	}
	defer cat.Close()
	newMK, err := newMasterKey(e, cfg, cat, abs)
	if err != nil {
		return err
	}
	if string(newMK.CheckValue()) == string(oldKey.CheckValue()) {
		return fmt.Errorf("the new key file %s holds the same key as the current master key %s; make a new key file", abs, cfg.MasterKey)
	}
	// A catalog made before tenant keys moves its data keys under them
	// first (archive.MoveToTenantKeys): the one long part.
	prog, err := newProgress(e.stderr, "master-key rotate", "data keys moved under tenant keys", false, func() (int, error) {
		if moved, err := cat.KeysMoved(e.ctx); err != nil || moved {
			return 0, err
		}
		return cat.CountWrappedKeys(e.ctx)
	})
	if err != nil {
		return err
	}
	n, err := archive.RotateMasterKey(e.ctx, cat, oldKey, newMK, abs, prog.addN)
	prog.done()
	if err != nil {
		return err
	}
	then := "the server refuses the old key from now on"
	if serving {
		then = "the running server takes the new key within a second (its log says so) and refuses the old one at its next start"
	} else if r, err := openReplica(e.ctx, cfg, newMK, cat, nil, true); err != nil || r != nil {
		// Nothing sealed under the old key stays in the replica: a whole
		// generation under the new one, then the old objects deleted.
		if err == nil {
			err = r.Rotate(e.ctx)
		}
		if err != nil {
			return fmt.Errorf("rotated %d tenant key(s), but the replica still holds generations sealed under the old master key: %v; the server writes a whole generation under the new key when it starts", n, err)
		}
	}
	fmt.Fprintf(e.stderr, "vcon-server: rotated %d tenant key(s); now set master_key = %q in %s: %s; keep the old key file as long as you keep catalog backups taken before this rotation\n", n, abs, cfg.Path, then)
	return e.emit(map[string]any{"rotated": n, "new_key": abs})
}

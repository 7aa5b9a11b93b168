package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/vcon-server/vcon-server/ids"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/seal"
)

func init() {
	var newKey string
	register(&command{
		name:    "master-key rotate",
		summary: "re-wrap every data key under a new master key in one transaction, server stopped; then set master_key to the new file",
		flags: func(fs *flag.FlagSet) {
			newKey = ""
			fs.StringVar(&newKey, "new", "", "the new master key file: 32 bytes, raw or base64, mode 0400 or 0600")
		},
		run: func(e *env, _ *flag.FlagSet, _ []string) error { return runRotate(e, newKey) },
	})
}

// runRotate moves every data key from the configured master key to the
// new one. The server must be stopped (invariant 8): a server running on
// the old key would wrap new data keys that the new key cannot open.
// Nothing changes unless the one transaction commits, so a rotation cut
// off anywhere leaves the old key working; the old key file is never
// touched.
func runRotate(e *env, newPath string) error {
	if newPath == "" {
		return usageError{"master-key rotate needs --new FILE, the new master key file; vcon-server master-key rotate --help shows its usage"}
	}
	abs, err := filepath.Abs(newPath)
	if err != nil {
		return err
	}
	if _, err := os.Stat(abs); os.IsNotExist(err) {
		return fmt.Errorf("the new master key file %s does not exist; make one with: (umask 077 && head -c 32 /dev/urandom > %s && chmod 0400 %s)", abs, abs, abs)
	}
	cfg, oldKey, cat, release, err := e.offline("vcon-server master-key rotate")
	if err != nil {
		return err
	}
	defer release()
	newMK, err := seal.LoadMasterKey(abs)
	if err != nil {
		return err
	}
	if string(newMK.CheckValue()) == string(oldKey.CheckValue()) {
		return fmt.Errorf("the new key file %s holds the same key as the current master key %s; make a new key file", abs, cfg.MasterKey)
	}
	rewrap := func(tenant, version ids.ID, wrapped []byte) ([]byte, error) {
		dk, err := oldKey.Unwrap(wrapped, tenant, version)
		if err != nil {
			return nil, fmt.Errorf("the data key of version %s (tenant %s) does not open with the current master key, so nothing was rotated; vcon-server check --deep names the damaged versions", version, tenant)
		}
		return newMK.Wrap(dk, tenant, version)
	}
	n, err := cat.RotateKeys(e.ctx, newMK.CheckValue(), rewrap, func() { crashpoint.Hit(crashpoint.RotateBeforeCommit) })
	if err != nil {
		return err
	}
	// Search indexes are keyed by the master key: those made under the old
	// one are dropped now (serve would at its next start) so that nothing
	// keyed by the old key stays in the catalog; serve builds them again.
	if _, err := cat.ResetSearchKeys(e.ctx, newMK.CheckValue()); err != nil {
		return fmt.Errorf("the rotation is committed, but dropping the search indexes made under the old key failed (the next start does it): %w", err)
	}
	// The keys wrapped under the old master key stay in the WAL until a
	// checkpoint copies the new ones over them; secure_delete zeroes what
	// is freed.
	cctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	if err := cat.Checkpoint(cctx); err != nil {
		return fmt.Errorf("the rotation is committed, but checkpointing the catalog failed (the next start does it): %w", err)
	}
	fmt.Fprintf(e.stderr, "vcon-server: rotated %d data key(s); now set master_key = %q in %s: the server refuses the old key from now on; keep the old key file as long as you keep catalog backups taken before this rotation\n", n, abs, cfg.Path)
	return e.emit(map[string]any{"rotated": n, "new_key": abs})
}

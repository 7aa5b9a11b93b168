package cli

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/vcon-server/vcon-server/catalog"
)

func init() {
	var to string
	register(&command{
		name:    "backup",
		summary: "write a consistent copy of the catalog while the server runs; it holds the wrapped data keys: keep it as secret as the master key",
		flags: func(fs *flag.FlagSet) {
			to = ""
			fs.StringVar(&to, "to", "", "the new file to write (never overwritten)")
		},
		run: func(e *env, _ *flag.FlagSet, _ []string) error { return runBackup(e, to) },
	})
}

// runBackup copies the catalog beside a serving server (invariant 8: it
// takes no lock; SQLite's snapshot makes the copy consistent) and prints
// {to, bytes, versions, tenants}.
func runBackup(e *env, to string) error {
	if to == "" {
		return usageError{"backup needs --to FILE, a new file for the copy; vcon-server backup --help shows its usage"}
	}
	abs, err := filepath.Abs(to)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(abs); err == nil {
		return fmt.Errorf("%s already exists, and backup never overwrites a file; name a new file, or remove the old one first", abs)
	}
	if fi, err := os.Stat(filepath.Dir(abs)); err != nil || !fi.IsDir() {
		return fmt.Errorf("the folder %s does not exist; create it first (mkdir -m 0700 %s)", filepath.Dir(abs), filepath.Dir(abs))
	}
	_, cat, err := e.openCatalog()
	if err != nil {
		return err
	}
	defer cat.Close()
	info, err := cat.Backup(e.ctx, abs)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s was created while the backup ran, and backup never overwrites a file; name a new file", abs)
	}
	if err != nil {
		return err
	}
	// Who copied the wrapped keys out, and where to, is an operator action
	// the admin log keeps.
	if err := cat.AdminLog(e.ctx, catalog.Record{Actor: catalog.CLI.Name, Action: "catalog_backup", Target: info.To, Status: 200}); err != nil {
		return fmt.Errorf("the backup %s is written, but recording it in the admin log failed: %w", info.To, err)
	}
	return e.emit(info)
}

package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"

	"github.com/vcon-server/vcon-server/internal/durable"
)

// BackupInfo describes a backup just written.
type BackupInfo struct {
	To       string `json:"to"`
	Bytes    int64  `json:"bytes"`
	Versions int    `json:"versions"` // versions the copy can still open (purge not started)
	Tenants  int    `json:"tenants"`
}

// Backup writes a consistent copy of the catalog to the new file to while
// other connections (a serving server) keep reading and writing: SQLite's
// VACUUM INTO reads one snapshot, so the copy is the catalog as of one
// commit, with no half-written transaction in it.
//
// The copy holds every wrapped data key, so it is made readable by its
// owner only (0600) from its first byte: it is written to a temporary
// name created with that mode, synced, then published under to with a
// hard link, which never replaces a file (an existing to, even one
// created meanwhile, is refused with an error wrapping fs.ErrExist),
// and the directory is synced so the new name survives a crash.
//
// The snapshot is a read transaction on the catalog for as long as the
// copy takes: while it lasts, a purge's checkpoint waits (invariant 4 is
// only reached once every reader has moved past the key's deletion).
func (c *Catalog) Backup(ctx context.Context, to string) (info BackupInfo, err error) {
	abs, err := filepath.Abs(to)
	if err != nil {
		return info, fmt.Errorf("backup: %w", err)
	}
	if _, err := os.Lstat(abs); err == nil {
		return info, fmt.Errorf("backup: %s: %w", abs, fs.ErrExist)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return info, fmt.Errorf("backup: %w", err)
	}
	// The temporary file is created here, mode 0600, before a wrapped key
	// is written into it; VACUUM INTO accepts an empty existing file.
	// SQLite writes it by name, so the descriptor is closed at once: a
	// descriptor of ours closed while SQLite held a lock on the file would
	// drop the lock.
	f, err := durable.CreateTemp(filepath.Dir(abs), "."+filepath.Base(abs)+".tmp-*", 0o600)
	if err != nil {
		return info, fmt.Errorf("backup: create a temporary file beside %s: %w", abs, err)
	}
	tmp := f.Name()
	f.Close()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if _, err := c.db.ExecContext(ctx, `VACUUM INTO ?`, tmp); err != nil {
		return info, fmt.Errorf("backup: copy the catalog: %w", err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return info, fmt.Errorf("backup: %w", err)
	}
	info, err = inspectCopy(ctx, tmp)
	if err != nil {
		return info, err
	}
	info.To = abs
	// VACUUM INTO does not sync what it wrote: the bytes must be on disk
	// before the name that promises a backup is.
	if err := durable.Link(tmp, abs); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return info, fmt.Errorf("backup: %s: %w", abs, fs.ErrExist)
		}
		return info, fmt.Errorf("backup: publish %s: %w", abs, err)
	}
	return info, nil
}

// inspectCopy opens the copy read-only and unchanged (immutable: no lock,
// no journal, no -wal or -shm beside it), proves SQLite reads it whole,
// and counts what it holds.
func inspectCopy(ctx context.Context, path string) (BackupInfo, error) {
	var info BackupInfo
	q := url.Values{}
	q.Set("mode", "ro")
	q.Set("immutable", "1")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return info, fmt.Errorf("backup: open the copy: %w", err)
	}
	defer db.Close()
	var check string
	if err := db.QueryRowContext(ctx, `PRAGMA quick_check`).Scan(&check); err != nil {
		return info, fmt.Errorf("backup: check the copy: %w", err)
	}
	if check != "ok" {
		return info, fmt.Errorf("backup: the copy fails SQLite's quick_check: %s", check)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM versions WHERE purge = 0`).Scan(&info.Versions); err != nil {
		return info, fmt.Errorf("backup: count the copy's versions: %w", err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM tenants`).Scan(&info.Tenants); err != nil {
		return info, fmt.Errorf("backup: count the copy's tenants: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return info, fmt.Errorf("backup: %w", err)
	}
	info.Bytes = fi.Size()
	return info, nil
}

package export

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// scratchPrefix starts the name of an export's scratch folder in the spool.
const scratchPrefix = "export-"

// NewScratch makes an export's private scratch folder in spoolDir (mode
// 0700) and holds a lock in it while the export runs. The folder holds
// the live ids and, for a bucket, each file while it is sent, clear
// columns included; release removes it. Scratch folders that a killed
// export left (no process holds their lock) are removed first.
func NewScratch(spoolDir string) (dir string, release func(), err error) {
	if err := os.MkdirAll(spoolDir, 0o700); err != nil {
		return "", nil, fmt.Errorf("export: scratch folder: %w", unwrapPath(err))
	}
	RemoveStaleScratch(spoolDir)
	dir, err = os.MkdirTemp(spoolDir, scratchPrefix)
	if err != nil {
		return "", nil, fmt.Errorf("export: scratch folder: %w", unwrapPath(err))
	}
	lock, err := lockScratch(dir, true)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("export: scratch folder: %w", err)
	}
	return dir, func() {
		os.RemoveAll(dir)
		lock.Close()
	}, nil
}

// lockScratch takes the folder's lock without waiting. The lock is
// released when the file is closed or its process ends, however it ends.
func lockScratch(dir string, create bool) (*os.File, error) {
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), flags, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// RemoveStaleScratch removes the scratch folders of exports that no longer
// run, and returns how many. A folder whose lock file is missing is left
// for an hour: its export may be between making it and locking it.
func RemoveStaleScratch(spoolDir string) int {
	entries, err := os.ReadDir(spoolDir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), scratchPrefix) {
			continue
		}
		dir := filepath.Join(spoolDir, e.Name())
		lock, err := lockScratch(dir, false)
		if errors.Is(err, fs.ErrNotExist) {
			if info, err := e.Info(); err != nil || time.Since(info.ModTime()) < time.Hour {
				continue
			}
		} else if err != nil {
			continue // held: that export still runs
		}
		if os.RemoveAll(dir) == nil {
			n++
		}
		if lock != nil {
			lock.Close()
		}
	}
	return n
}

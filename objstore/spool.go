package objstore

import (
	"errors"
	"os"
	"path/filepath"
	"time"
)

// SpoolDir is where uploads to a bucket are spooled under a data
// directory: sealed bytes only.
func SpoolDir(dataDir string) string { return filepath.Join(dataDir, "spool") }

// RemoveStaleSpool removes spooled uploads older than age: a crash left
// them (they hold sealed bytes only). Younger ones may belong to a CLI
// command running beside the server.
func RemoveStaleSpool(dataDir string, age time.Duration) (int, error) {
	entries, err := os.ReadDir(SpoolDir(dataDir))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || e.IsDir() || time.Since(info.ModTime()) < age {
			continue
		}
		if os.Remove(filepath.Join(SpoolDir(dataDir), e.Name())) == nil {
			n++
		}
	}
	return n, nil
}

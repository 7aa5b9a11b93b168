package objstore

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Cleaning a Dir after a crash: the temporary files of uploads it cut off.

// RemoveStaleTemps removes the temporary files of uploads that a crash cut
// off, when last written more than olderThan ago: an upload in progress
// keeps writing, so a margin longer than any upload leaves it alone. It
// returns how many it removed. It reads the folders' names only, and
// stats only temporary files and symbolic links: with no temporary file
// left, its cost is a read of each folder, never a stat of each object.
func (d *Dir) RemoveStaleTemps(olderThan time.Duration) (int, error) {
	if olderThan < 0 {
		return 0, errors.New("objstore: negative age for stale temporary files")
	}
	removed := 0
	err := removeTemps(d.root, time.Now().Add(-olderThan), &removed)
	return removed, err
}

// removeTemps removes the stale temporary files under the folder dir, in
// the order the file system keeps their names, descending into folders
// (symbolic links included, as walk does) but not into temporary ones.
func removeTemps(dir string, cutoff time.Time, removed *int) error {
	f, err := os.Open(dir)
	if missing(err) {
		return nil
	}
	if err != nil {
		return fsErr("read folder", err)
	}
	defer f.Close()
	for {
		entries, readErr := f.ReadDir(4096)
		for _, e := range entries {
			name := e.Name()
			p := filepath.Join(dir, name)
			typ := e.Type()
			if typ&fs.ModeSymlink != 0 {
				fi, err := os.Stat(p)
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				if err != nil {
					return fsErr("stat", err)
				}
				typ = fi.Mode().Type()
			}
			temp := strings.HasPrefix(name, tempPrefix)
			switch {
			case typ.IsDir() && !temp:
				if err := removeTemps(p, cutoff, removed); err != nil {
					return err
				}
			case typ.IsRegular() && temp:
				fi, err := os.Stat(p)
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				if err != nil {
					return fsErr("stat", err)
				}
				if !fi.ModTime().Before(cutoff) {
					continue
				}
				if err := os.Remove(p); err == nil {
					*removed++
				} else if !errors.Is(err, fs.ErrNotExist) {
					return fsErr("remove temporary file", err)
				}
			}
		}
		if readErr == io.EOF {
			return nil
		}
		if readErr != nil {
			return fsErr("read folder", readErr)
		}
	}
}

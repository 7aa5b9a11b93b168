package objstore

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Listing a Dir: its keys in lexical order, read folder by folder, never
// showing a temporary file.

// List walks the folders under prefix. The prefix may end inside a name
// ("objects/ab" lists "objects/ab…/…" and "objects/abc"); the part up to
// its last "/" must itself be a valid folder.
func (d *Dir) List(ctx context.Context, prefix string, fn func(Info) error) error {
	folder, name := "", prefix
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		folder, name = prefix[:i+1], prefix[i+1:]
		if _, err := d.path(folder[:i]); err != nil {
			return errors.New("objstore: invalid list prefix")
		}
	}
	return d.walk(ctx, folder, name, func(key string, fi fs.FileInfo, temp bool) error {
		if temp {
			return nil
		}
		return fn(Info{Key: key, Size: fi.Size(), Modified: fi.ModTime()})
	})
}

// walk calls visit for each regular file under the folder rel ("" or ending
// in "/") whose name starts with name, descending into folders, symbolic
// links included so an operator may move objects/ to another disk. Files
// come in the lexical order of their keys: a folder sorts as its name
// followed by "/", as its keys do.
//
// The order needs every name of a folder before the first visit: walk
// keeps those names only (a tenant's folder may hold a million), read a
// batch at a time, and stats each file when it visits it.
func (d *Dir) walk(ctx context.Context, rel, name string, visit func(key string, fi fs.FileInfo, temp bool) error) error {
	folder := filepath.Join(d.root, filepath.FromSlash(rel))
	names, err := sortedNames(folder, name)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		key := rel + n
		if strings.HasSuffix(n, "/") {
			if strings.HasPrefix(n, tempPrefix) {
				continue
			}
			if err := d.walk(ctx, key, "", visit); err != nil {
				return err
			}
			continue
		}
		fi, err := os.Stat(filepath.Join(folder, n))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the folder was read
		}
		if err != nil {
			return fsErr("stat", err)
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		if err := visit(key, fi, strings.HasPrefix(n, tempPrefix)); err != nil {
			return err
		}
	}
	return nil
}

// sortedNames reads the names in folder that start with prefix, a folder's
// with "/" after it, in lexical order; files of other kinds are left out.
func sortedNames(folder, prefix string) ([]string, error) {
	f, err := os.Open(folder)
	if missing(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fsErr("read folder", err)
	}
	defer f.Close()
	var names []string
	for {
		entries, err := f.ReadDir(1024)
		for _, e := range entries {
			n := e.Name()
			if !strings.HasPrefix(n, prefix) || strings.ContainsRune(n, '\\') {
				continue
			}
			typ := e.Type()
			if typ&fs.ModeSymlink != 0 {
				fi, err := os.Stat(filepath.Join(folder, n))
				if errors.Is(err, fs.ErrNotExist) {
					continue // a dangling link, or removed since
				}
				if err != nil {
					return nil, fsErr("stat", err)
				}
				typ = fi.Mode().Type()
			}
			switch {
			case typ.IsDir():
				names = append(names, n+"/")
			case typ.IsRegular():
				names = append(names, n)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fsErr("read folder", err)
		}
	}
	slices.Sort(names)
	return names, nil
}

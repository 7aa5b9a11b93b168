// Package secretfile reads the files that hold secrets (S3 secret keys,
// KMS tokens, webhook secrets): refused when the file's group or others
// may use it, since whoever reads one can act as the server.
package secretfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Read returns the file's bytes, at most limit of them (a longer file is
// refused). Its errors read after the path, which the caller names once:
// "storage.s3.secret_access_key_file: /etc/x " + err.
func Read(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("cannot be read: %w", err)
	}
	defer f.Close()
	// The mode checked is the mode of the open file, the bytes read.
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cannot be read: %w", err)
	}
	if fi.IsDir() {
		return nil, errors.New("is a folder, not a file")
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("is not a regular file")
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		what := "readable"
		if perm&0o044 == 0 {
			what = "writable or executable"
		}
		return nil, fmt.Errorf("is %s by group or others (mode %04o); run: chmod 0600 %s (or 0400)", what, perm, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("cannot be read: %w", err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("is longer than %d bytes, too long for the secret it should hold", limit)
	}
	return data, nil
}

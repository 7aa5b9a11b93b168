package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// CheckFiles checks that the files a serve reads exist and can be read, so
// a start refuses at once, naming the key and the path, rather than when
// the first TLS handshake or bucket request needs them. needMasterKey is
// false for commands that open no sealed version. The files of
// [export.s3] are left to the export that uses them.
func (c *Config) CheckFiles(needMasterKey bool) error {
	type file struct{ key, path string }
	var files []file
	if needMasterKey {
		files = append(files, file{"master_key", c.MasterKey})
	}
	files = append(files, file{"tls.cert", c.TLS.Cert}, file{"tls.key", c.TLS.Key})
	if s := c.Storage.S3; s != nil {
		files = append(files, file{"storage.s3.secret_access_key_file", s.SecretAccessKeyFile})
		if s.CAFile != "" {
			files = append(files, file{"storage.s3.ca_file", s.CAFile})
		}
	}
	for _, f := range files {
		if err := readable(f.path); err != nil {
			return fmt.Errorf("configuration: %s: %s %w", f.key, f.path, err)
		}
	}
	return nil
}

// readable opens the file as its reader will. Its error reads after the
// path.
func readable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("cannot be read: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("cannot be read: %w", err)
	}
	if fi.IsDir() {
		return errors.New("is a folder, not a file")
	}
	return nil
}

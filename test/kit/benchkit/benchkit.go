// Package benchkit holds what more than one benchmark package needs: the
// 4 KiB vCon they store, and the disk's floor for a durable small file.
package benchkit

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/vcon-server/vcon-server/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
)

// Vcon4K is an unsigned vCon of 4096 bytes.
func Vcon4K(uuid string) []byte {
	body := apitest.NewVcon(uuid, "benchmark", "+15555550100")
	pad := 4096 - len(body) - len(`,"pad":""`)
	return append(body[:len(body)-1], []byte(`,"pad":"`+strings.Repeat("x", pad)+`"}`)...)
}

// WriteDurable writes body as a new file in dir with the steps the data
// directory takes for an object (a temporary file, fsync, rename, then an
// fsync of the directory d, which is dir opened): the disk's floor for a
// store, with no server around it.
func WriteDurable(d *os.File, dir string, body []byte) error {
	name := filepath.Join(dir, ids.NewRandom().String())
	f, err := os.OpenFile(name+".tmp", os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(body); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(name+".tmp", name); err != nil {
		return err
	}
	return d.Sync()
}

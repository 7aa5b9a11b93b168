package catalog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// LockName is the lock file serve holds in the data directory.
const LockName = "serve.lock"

// ErrLocked is returned by Lock when another process holds the lock.
var ErrLocked = errors.New("a vcon-server serve is running on this data directory")

// Lock takes the data directory's exclusive lock (flock): serve holds it for
// its lifetime; check, storage move-objects and master-key rotate take it
// to prove no server runs. The kernel drops it when the process dies, so a
// crash never leaves a stale lock.
func Lock(dataDir string) (release func(), err error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dataDir, LockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrLocked
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

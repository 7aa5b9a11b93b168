package objstore

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// openFile opens name as os.OpenFile does, handing the descriptor to
// os.NewFile instead. os.OpenFile makes every descriptor non-blocking and
// offers it to the runtime's network poller, which refuses regular files
// and folders, then makes it blocking again: four system calls more for
// each object read, written or folder synced, about a tenth of an export's
// CPU. Files and folders block on I/O either way.
func openFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	for {
		fd, err := syscall.Open(name, flag|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if err == nil {
			return os.NewFile(uintptr(fd), name), nil
		}
		if !errors.Is(err, syscall.EINTR) {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
	}
}

// createTemp makes a new file, mode 0600, named prefix and random digits
// in dir, as os.CreateTemp does (O_EXCL: two callers never share one).
func createTemp(dir, prefix string) (*os.File, error) {
	for try := 0; ; try++ {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10))
		f, err := openFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) && try < 10000 {
			continue
		}
		return f, err
	}
}

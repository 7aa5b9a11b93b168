//go:build crashpoints

package crashpoint

import (
	"os"
	"syscall"
)

var at = os.Getenv(EnvVar)

// Hit kills the process, as a power cut would, when the test asked for
// this point.
func Hit(name string) {
	if at == name {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
}

// Enabled reports whether this build has crash points.
const Enabled = true

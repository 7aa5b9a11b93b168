//go:build !crashpoints

package crashpoint

// Hit does nothing: release builds have no crash points.
func Hit(string) {}

// Enabled reports whether this build has crash points.
const Enabled = false

//go:build nologtree

package catalog

// logTrees is false in the benchmark's baseline build only: records are
// rows, as before the logs were trees. Never released.
const logTrees = false

//go:build !nologtree

package catalog

// logTrees: every record is a leaf of its log (docs/FORMAT.md, "Audit log
// tree"). Only the baseline of the trees' cost benchmark is built without
// them (-tags nologtree, test/e2e's BenchmarkIngestLogTrees).
const logTrees = true

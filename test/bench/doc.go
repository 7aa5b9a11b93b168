// Package bench is issue 15's benchmark table: `make perf` (and `make
// bench`, which runs it after the Go benchmarks) measures what vcon-server
// adds to the S3 calls and disk writes it makes, each figure beside a
// baseline measured in the same run on the same machine, and prints one
// markdown table; with issue 31's rows, what the replica costs a store
// against the replica off in the same run (test/kit/replicabench, the
// code make replica-bench runs too). It is never part of `make test`:
// TestPerf skips unless VCON_PERF=1. See perf_test.go for the knobs.
package bench

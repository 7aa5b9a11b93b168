package bench

import (
	"fmt"
	"testing"

	"github.com/vcon-server/vcon-server/test/kit/replicabench"
)

// replicaRows: what the replica costs a store (issue 31), by the method
// and code of make replica-bench (test/kit/replicabench): 8 clients, 4 KiB
// vCons, VCON_PERF_SECONDS a turn, 5 interleaved rounds, their medians;
// max_lag = 1 and 0 each against the replica off on the same storage in
// this run, on the data directory with the replica in a directory and on
// S3 with the replica in the bucket; and each one's p99 against its p50.
func replicaRows(t *testing.T, tb *table) {
	o := replicabench.Options{Turn: measureFor(t), Rounds: 5, Dir: true, S3: startS3(t)}
	for _, r := range replicabench.Run(t, o) {
		if r.Lag == replicabench.Off {
			continue
		}
		storage := "data directory store, replica in a directory"
		if r.S3 {
			storage = "S3 store, replica in the bucket"
		}
		what := fmt.Sprintf("%s, %s, %d clients", storage, r.Replica(), replicabench.Clients)
		lo, hi := r.RoundRatios()
		tb.add(row{
			figure:   what + " (vs replica off)",
			server:   perSec(r.Rate()),
			baseline: "replica off " + perSec(r.Off().Rate()),
			ratio:    fmt.Sprintf("%s (rounds %.2f–%.2f)", ratio(r.Rate(), r.Off().Rate()), lo, hi),
			goal:     "—",
		})
		tb.add(row{
			figure:   what + ": latency (p99/p50)",
			server:   fmt.Sprintf("p50 %s, p99 %s", millis(r.P50()), millis(r.P99())),
			baseline: fmt.Sprintf("replica off p50 %s, p99 %s", millis(r.Off().P50()), millis(r.Off().P99())),
			ratio:    fmt.Sprintf("%.2f×", float64(r.P99())/float64(r.P50())),
			goal:     fmt.Sprintf("≤ %d×", replicabench.LatencyGoal),
			met:      yes(r.MeetsLatencyGoal()),
		})
	}
}

package replicabench

import (
	"fmt"
	"strings"
	"time"
)

// LatencyGoal is the bound on a store's p99 with the replica on:
// at most this many times its p50.
const LatencyGoal = 3

// MeetsLatencyGoal reports whether r's p99 is within LatencyGoal of its
// p50.
func (r *Result) MeetsLatencyGoal() bool { return r.P99() <= LatencyGoal*r.P50() }

// Table is the results as plain text: the medians with their ratios, then
// every round's rate, so that a reader sees the noise beside the figure.
func Table(results []*Result, o Options) string {
	var b strings.Builder
	rounds := 0
	if len(results) > 0 {
		rounds = len(results[0].Turns)
	}
	fmt.Fprintf(&b, "ingest: %d clients, 4 KiB vCons, %d interleaved rounds of %s; medians of the rounds; ratios against the replica off on the same storage, same run\n",
		Clients, rounds, o.Turn)
	if o.Targets != "" {
		fmt.Fprintf(&b, "directory replicas under %s\n", o.Targets)
	}
	const row = "  %-40s %-12s %9s %6s  %-12s %9s %9s %8s %5s %10s %8s\n"
	fmt.Fprintf(&b, row, "storage", "replica", "stores/s", "ratio", "round ratios", "p50", "p99", "p99/p50", "≤ 3×", "B/version", "PUT/ver")
	for _, r := range results {
		storage := r.Storage()
		if r.Lag != Off {
			storage = "" // under its replica-off row
		}
		ratios, goal, perVer, puts := "-", "-", "-", "-"
		if r.Lag != Off {
			lo, hi := r.RoundRatios()
			ratios = fmt.Sprintf("%.2f–%.2f", lo, hi)
			goal = yes(r.MeetsLatencyGoal())
			by, ob := r.PerVersion()
			perVer, puts = fmt.Sprintf("%.0f", by), fmt.Sprintf("%.3f", ob)
		}
		fmt.Fprintf(&b, row, storage, r.Replica(), fmt.Sprintf("%.0f", r.Rate()), fmt.Sprintf("%.2f", r.Ratio()), ratios,
			ms(r.P50()), ms(r.P99()), fmt.Sprintf("%.2f×", float64(r.P99())/float64(r.P50())), goal, perVer, puts)
	}
	b.WriteString("stores/s by round, in the order run (each round reverses the one before):\n")
	for _, r := range results {
		rates := make([]string, len(r.Turns))
		for i, t := range r.Turns {
			rates[i] = fmt.Sprintf("%6.0f", t.Rate())
		}
		fmt.Fprintf(&b, "  %-3s %-12s %s\n", map[bool]string{false: "dir", true: "S3"}[r.S3], r.Replica(), strings.Join(rates, " "))
	}
	return b.String()
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

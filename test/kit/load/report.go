package load

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// OpStats are one operation's figures.
type OpStats struct {
	Count  int     `json:"count"`
	Errors int     `json:"errors"`
	Failed int     `json:"failed"`
	P50    float64 `json:"p50_ms"`
	P99    float64 `json:"p99_ms"`
}

// Report is the run's result, printed as one JSON line.
type Report struct {
	Duration      float64            `json:"duration_s"`
	Tenants       int                `json:"tenants"`
	Workers       int                `json:"workers"`
	Requests      int64              `json:"requests"`
	Throughput    float64            `json:"throughput_rps"`
	Errors        int                `json:"errors"`
	Failed        int                `json:"failed"`
	VersionsAcked int                `json:"versions_acked"`
	Verified      int                `json:"verified"`
	Lost          int                `json:"lost"`
	Ops           map[string]OpStats `json:"ops"`
	FirstErrors   []string           `json:"first_errors,omitempty"`
	Seed          uint64             `json:"seed"`
}

type sample struct {
	op     string
	d      time.Duration
	err    bool
	failed bool
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (r *run) record(s sample, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = append(r.samples, s)
	if !s.err && !s.failed {
		r.counts[s.op]++
	}
	if s.err {
		r.nerr++
		if len(r.errs) < 10 {
			r.errs = append(r.errs, s.op+": "+why)
		}
	}
}

// JSON is the report as one line.
func (rep Report) JSON() string {
	b, _ := json.Marshal(rep)
	return string(b)
}

// Summary is a short human line: ops sorted by name.
func (rep Report) Summary() string {
	ops := make([]string, 0, len(rep.Ops))
	for op := range rep.Ops {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	var b strings.Builder
	fmt.Fprintf(&b, "%d requests in %.1fs (%.0f/s), errors=%d failed=%d acked=%d verified=%d lost=%d;",
		rep.Requests, rep.Duration, rep.Throughput, rep.Errors, rep.Failed, rep.VersionsAcked, rep.Verified, rep.Lost)
	for _, op := range ops {
		s := rep.Ops[op]
		fmt.Fprintf(&b, " %s=%d p50=%.1fms p99=%.1fms", op, s.Count, s.P50, s.P99)
	}
	return b.String()
}

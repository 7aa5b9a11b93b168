package server

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/internal/metrics"
)

// Metrics are the server's counters. Labels are route patterns and status
// classes only: never a tenant, a uuid or a path a client chose.
type Metrics struct {
	Registry  *metrics.Registry
	requests  *metrics.Counter
	latency   *metrics.Histogram
	bytesIn   *metrics.Counter
	bytesOut  *metrics.Counter
	stores    *metrics.Counter
	reads     *metrics.Counter
	readBytes *metrics.Counter
	purges    *metrics.Counter
	sweeps    *metrics.Counter
	packRuns  *metrics.Counter
	packFiles *metrics.Counter
	packVers  *metrics.Counter
	indexed   *metrics.Counter
	mcpCalls  *metrics.Counter
	mcpRefuse *metrics.Counter
}

// Outcomes of a pack run, the values of vcon_pack_runs_total{outcome}.
const (
	PackOK        = "ok"        // every tenant's run finished
	PackFailed    = "failed"    // some tenant's run failed (the log says why)
	PackAbandoned = "abandoned" // the run stopped early (shutdown, or a name taken)
)

// NewMetrics registers the HTTP metrics in reg.
func NewMetrics(reg *metrics.Registry) *Metrics {
	m := &Metrics{
		Registry:  reg,
		requests:  reg.NewCounter("vcon_http_requests_total", "HTTP requests by route and status class.", "route", "code"),
		latency:   reg.NewHistogram("vcon_http_request_duration_seconds", "HTTP request latency by route.", metrics.LatencyBuckets, "route"),
		bytesIn:   reg.NewCounter("vcon_http_request_bytes_total", "Bytes of vCons received."),
		bytesOut:  reg.NewCounter("vcon_http_response_bytes_total", "Bytes of vCons served."),
		stores:    reg.NewCounter("vcon_stores_total", "Versions stored."),
		reads:     reg.NewCounter("vcon_reads_total", "Versions read."),
		readBytes: reg.NewCounter("vcon_read_bytes_total", "Bytes of vCons read."),
		purges:    reg.NewCounter("vcon_purges_total", "Data keys destroyed by purges: a DELETE with retention 0d, and the purge sweep."),
		sweeps:    reg.NewCounter("vcon_purge_sweeps_total", "Purge sweeps run, by outcome.", "outcome"),
		packRuns:  reg.NewCounter("vcon_pack_runs_total", "Parquet pack runs, by outcome.", "outcome"),
		packFiles: reg.NewCounter("vcon_pack_files_total", "Pack files written from objects by pack runs."),
		packVers:  reg.NewCounter("vcon_packed_versions_total", "Versions moved from objects into pack files."),
		indexed:   reg.NewCounter("vcon_search_indexed_versions_total", "Versions read by the background search indexing (turning search on for a tenant)."),
		mcpCalls:  reg.NewCounter("vcon_mcp_calls_total", "MCP tool calls and resource reads, by tool and outcome.", "tool", "outcome"),
		mcpRefuse: reg.NewCounter("vcon_mcp_refusals_total", "MCP requests and calls refused, by reason.", "reason"),
	}
	for _, t := range append(append([]string{}, mcpTools...), "other", "resource") {
		for _, o := range []string{"ok", "refused", "error"} {
			m.mcpCalls.Declare(t, o)
		}
	}
	for _, r := range mcpRefusals {
		m.mcpRefuse.Declare(r)
	}
	m.sweeps.Declare("ok")
	m.sweeps.Declare("error")
	for _, o := range []string{PackOK, PackFailed, PackAbandoned} {
		m.packRuns.Declare(o)
	}
	return m
}

// Indexed counts versions the background search indexing read.
func (m *Metrics) Indexed(n int) { m.indexed.Add(float64(n)) }

// Purged counts data keys a purge destroyed (archive.Archive.Purged).
func (m *Metrics) Purged(n int) { m.purges.Add(float64(n)) }

// Swept counts one purge sweep.
func (m *Metrics) Swept(err error) {
	if err != nil {
		m.sweeps.Inc("error")
	} else {
		m.sweeps.Inc("ok")
	}
}

// PackRun counts one pack run: its outcome (PackOK, PackFailed or
// PackAbandoned; anything else counts as "other", so no value made at run
// time can become a label) and the files and versions it packed from
// objects.
func (m *Metrics) PackRun(outcome string, files, versions int) {
	switch outcome {
	case PackOK, PackFailed, PackAbandoned:
	default:
		outcome = "other"
	}
	m.packRuns.Inc(outcome)
	m.packFiles.Add(float64(files))
	m.packVers.Add(float64(versions))
}

// Why an MCP request or call is refused, the values of
// vcon_mcp_refusals_total{reason}.
const (
	refusedScope   = "scope"        // the key lacks mcp or read
	refusedOrigin  = "origin"       // a foreign Origin
	refusedBatch   = "batch"        // a batch over maxBatch
	refusedRate    = "rate"         // over [mcp] rate
	refusedPurpose = "purpose"      // no purpose resolved for the key
	refusedLawful  = "lawful_basis" // the vCon's lawful basis denies the purpose
	refusedTimeout = "timeout"      // over [mcp] call_timeout
)

var mcpRefusals = []string{refusedScope, refusedOrigin, refusedBatch, refusedRate, refusedPurpose, refusedLawful, refusedTimeout}

func (m *Metrics) mcpRefused(reason string) { m.mcpRefuse.Inc(reason) }

// mcpCalled counts a call of tool ("resource" for a resource read) by
// the class of the status the same read would answer.
func (m *Metrics) mcpCalled(tool string, status int) {
	outcome := "ok"
	switch {
	case status >= 500:
		outcome = "error"
	case status >= 400:
		outcome = "refused"
	}
	m.mcpCalls.Inc(tool, outcome)
}

// baseTool is the tool a call's action names, "resource" for a resource
// read.
func baseTool(action string) string {
	_, rest, _ := strings.Cut(action, " ")
	k, v, _ := strings.Cut(rest, "=")
	if k == "resource" {
		return "resource"
	}
	return v
}

func (m *Metrics) stored(size int64) {
	m.stores.Inc()
	m.bytesIn.Add(float64(size))
}

func (m *Metrics) read(n int64) {
	m.reads.Inc()
	m.bytesOut.Add(float64(n))
	m.readBytes.Add(float64(n))
}

func (m *Metrics) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	m.Registry.Write(w)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument counts each request under its route pattern (unmatched
// requests under "other", so clients cannot mint label values).
func (m *Metrics) instrument(h *http.ServeMux, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			_, route := h.Handler(r)
			if route == "" {
				route = "other"
			}
			if sw.status == 0 {
				sw.status = http.StatusOK
			}
			m.requests.Inc(route, strconv.Itoa(sw.status/100)+"xx")
			m.latency.Observe(time.Since(start).Seconds(), route)
		}()
		h.ServeHTTP(sw, r)
	})
}

// Package metrics keeps counters and histograms and writes them in the
// Prometheus text format (version 0.0.4), by hand with the standard
// library. Label values are route patterns, status classes and call
// names: never a tenant, a uuid or anything a client sent.
package metrics

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Registry holds every metric of a process.
type Registry struct {
	mu      sync.Mutex
	metrics map[string]metric
}

type metric interface {
	write(w io.Writer, name string)
	help() (string, string)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{metrics: map[string]metric{}} }

// Write writes every metric, sorted by name.
func (r *Registry) Write(w io.Writer) {
	r.mu.Lock()
	names := make([]string, 0, len(r.metrics))
	for n := range r.metrics {
		names = append(names, n)
	}
	ms := r.metrics
	r.mu.Unlock()
	sort.Strings(names)
	for _, n := range names {
		m := ms[n]
		help, typ := m.help()
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", n, helpEscaper.Replace(help), n, typ)
		m.write(w, n)
	}
}

func (r *Registry) add(name string, m metric) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.metrics[name]; dup {
		panic("metrics: " + name + " registered twice")
	}
	r.metrics[name] = m
}

// Counter is a family of counters by label values.
type Counter struct {
	text   string
	labels []string
	mu     sync.Mutex
	values map[string]*float64
}

// NewCounter registers a counter family with the given label names.
func (r *Registry) NewCounter(name, help string, labels ...string) *Counter {
	c := &Counter{text: help, labels: labels, values: map[string]*float64{}}
	r.add(name, c)
	return c
}

// Add adds v to the counter with these label values (in the order the
// labels were named).
func (c *Counter) Add(v float64, values ...string) {
	if v < 0 || math.IsNaN(v) {
		return // a counter never goes down; a scraper would read a restart
	}
	key := labelText(c.labels, values)
	c.mu.Lock()
	p := c.values[key]
	if p == nil {
		p = new(float64)
		c.values[key] = p
	}
	*p += v
	c.mu.Unlock()
}

// Inc adds one.
func (c *Counter) Inc(values ...string) { c.Add(1, values...) }

// Declare makes the series with these label values exist at zero, so that
// a page scraped before the first event already shows it: a rate over a
// series that appears only with its first increment misses that one.
func (c *Counter) Declare(values ...string) { c.Add(0, values...) }

// Value returns the counter with these label values (0 when never added).
func (c *Counter) Value(values ...string) float64 {
	key := labelText(c.labels, values)
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.values[key]; p != nil {
		return *p
	}
	return 0
}

// Gauge is a family of values that go up and down, by label values.
type Gauge struct {
	text   string
	labels []string
	mu     sync.Mutex
	values map[string]float64
}

// NewGauge registers a gauge family with the given label names.
func (r *Registry) NewGauge(name, help string, labels ...string) *Gauge {
	g := &Gauge{text: help, labels: labels, values: map[string]float64{}}
	r.add(name, g)
	return g
}

// Set sets the gauge with these label values.
func (g *Gauge) Set(v float64, values ...string) {
	key := labelText(g.labels, values)
	g.mu.Lock()
	g.values[key] = v
	g.mu.Unlock()
}

func (g *Gauge) help() (string, string) { return g.text, "gauge" }

func (g *Gauge) write(w io.Writer, name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	keys := slices.Sorted(maps.Keys(g.values))
	for _, k := range keys {
		fmt.Fprintf(w, "%s%s %s\n", name, k, num(g.values[k]))
	}
}

// gaugeFunc is a gauge without labels whose value is read as it is
// written: a count the process already keeps, never stale.
type gaugeFunc struct {
	text string
	f    func() float64
}

// NewGaugeFunc registers a gauge without labels whose value f gives at
// each scrape; f must be quick.
func (r *Registry) NewGaugeFunc(name, help string, f func() float64) {
	r.add(name, &gaugeFunc{text: help, f: f})
}

func (g *gaugeFunc) help() (string, string) { return g.text, "gauge" }

func (g *gaugeFunc) write(w io.Writer, name string) { fmt.Fprintf(w, "%s %s\n", name, num(g.f())) }

func (c *Counter) help() (string, string) { return c.text, "counter" }

func (c *Counter) write(w io.Writer, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := slices.Sorted(maps.Keys(c.values))
	if len(keys) == 0 && len(c.labels) == 0 {
		fmt.Fprintf(w, "%s 0\n", name)
	}
	for _, k := range keys {
		fmt.Fprintf(w, "%s%s %s\n", name, k, num(*c.values[k]))
	}
}

// Histogram is a family of histograms by label values.
type Histogram struct {
	text    string
	labels  []string
	buckets []float64
	mu      sync.Mutex
	values  map[string]*hist
}

type hist struct {
	counts []uint64
	sum    float64
	count  uint64
}

// NewHistogram registers a histogram family with upper bucket bounds.
func (r *Registry) NewHistogram(name, help string, buckets []float64, labels ...string) *Histogram {
	for i, b := range buckets {
		// The writer adds the +Inf bucket itself; bounds out of order would
		// make a page whose buckets go down, which Prometheus misreads.
		if math.IsInf(b, 1) || math.IsNaN(b) || (i > 0 && b <= buckets[i-1]) {
			panic("metrics: " + name + ": bucket bounds must be finite and ascending")
		}
	}
	h := &Histogram{text: help, labels: labels, buckets: buckets, values: map[string]*hist{}}
	r.add(name, h)
	return h
}

// Observe records one value.
func (h *Histogram) Observe(v float64, values ...string) {
	if math.IsNaN(v) {
		return
	}
	key := labelText(h.labels, values)
	h.mu.Lock()
	defer h.mu.Unlock()
	x := h.values[key]
	if x == nil {
		x = &hist{counts: make([]uint64, len(h.buckets))}
		h.values[key] = x
	}
	for i, b := range h.buckets {
		if v <= b {
			x.counts[i]++
		}
	}
	x.sum += v
	x.count++
}

func (h *Histogram) help() (string, string) { return h.text, "histogram" }

func (h *Histogram) write(w io.Writer, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	keys := slices.Sorted(maps.Keys(h.values))
	for _, k := range keys {
		x := h.values[k]
		inner := strings.TrimSuffix(strings.TrimPrefix(k, "{"), "}")
		sep := ""
		if inner != "" {
			sep = ","
		}
		for i, b := range h.buckets {
			fmt.Fprintf(w, "%s_bucket{%s%sle=\"%s\"} %d\n", name, inner, sep, num(b), x.counts[i])
		}
		fmt.Fprintf(w, "%s_bucket{%s%sle=\"+Inf\"} %d\n", name, inner, sep, x.count)
		fmt.Fprintf(w, "%s_sum%s %s\n", name, k, num(x.sum))
		fmt.Fprintf(w, "%s_count%s %d\n", name, k, x.count)
	}
}

func labelText(names, values []string) string {
	if len(names) != len(values) {
		panic(fmt.Sprintf("metrics: %d label values for %d labels", len(values), len(names)))
	}
	if len(names) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n)
		b.WriteString(`="`)
		b.WriteString(escape(values[i]))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
	// HELP text escapes backslash and newline only: a quote stands as is.
	helpEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func escape(s string) string { return labelEscaper.Replace(s) }

func num(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// LatencyBuckets are seconds from 1 ms to 60 s.
var LatencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

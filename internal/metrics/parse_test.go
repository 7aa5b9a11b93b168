package metrics_test

import (
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/vcon-server/vcon-server/internal/metrics"
	"github.com/vcon-server/vcon-server/test/kit/promtext"
)

// TestWrittenPageParses writes every kind of metric, with label values
// that need escaping, and reads the page back with the strict parser.
func TestWrittenPageParses(t *testing.T) {
	reg := metrics.NewRegistry()
	c := reg.NewCounter("t_requests_total", "Requests, with a \\ backslash\nand a newline.", "route", "code")
	reg.NewCounter("t_plain_total", "A counter without labels.")
	declared := reg.NewCounter("t_declared_total", "Declared series.", "outcome")
	g := reg.NewGauge("t_level", "A gauge.", "kind")
	h := reg.NewHistogram("t_seconds", "Latency.", []float64{0.1, 1, 10}, "route")
	h0 := reg.NewHistogram("t_plain_seconds", "Latency without labels.", []float64{1})

	c.Inc("GET /vcons/{uuid}", "2xx")
	c.Add(2, `a "quoted" \ value`+"\n", "5xx")
	c.Add(-5, "GET /vcons/{uuid}", "2xx") // refused: counters never go down
	declared.Declare("ok")
	declared.Declare("failed")
	declared.Inc("ok")
	g.Set(-1.5, "x")
	for _, v := range []float64{0.05, 0.5, 5, 50, math.NaN()} {
		h.Observe(v, "GET /metrics")
	}
	h0.Observe(0.5)

	var b strings.Builder
	reg.Write(&b)
	fams, err := promtext.Parse(strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"t_requests_total", []string{"route", "GET /vcons/{uuid}", "code", "2xx"}, 1},
		{"t_requests_total", []string{"route", `a "quoted" \ value` + "\n", "code", "5xx"}, 2},
		{"t_plain_total", nil, 0},
		{"t_declared_total", []string{"outcome", "ok"}, 1},
		{"t_declared_total", []string{"outcome", "failed"}, 0},
		{"t_level", []string{"kind", "x"}, -1.5},
		{"t_seconds_bucket", []string{"route", "GET /metrics", "le", "0.1"}, 1},
		{"t_seconds_bucket", []string{"route", "GET /metrics", "le", "10"}, 3},
		{"t_seconds_bucket", []string{"route", "GET /metrics", "le", "+Inf"}, 4},
		{"t_seconds_count", []string{"route", "GET /metrics"}, 4},
		{"t_seconds_sum", []string{"route", "GET /metrics"}, 55.55},
		{"t_plain_seconds_count", nil, 1},
	}
	for _, ch := range checks {
		got, ok := fams.Value(ch.name, ch.labels...)
		if !ok || math.Abs(got-ch.want) > 1e-9 {
			t.Errorf("%s%v = %v (present %v), want %v", ch.name, ch.labels, got, ok, ch.want)
		}
	}
	if f := fams["t_requests_total"]; f.Help != "Requests, with a \\ backslash\nand a newline." || f.Type != "counter" {
		t.Errorf("HELP/TYPE read back as %q %q", f.Help, f.Type)
	}
	if got := c.Value("GET /vcons/{uuid}", "2xx"); got != 1 {
		t.Errorf("Value = %v", got)
	}
}

// TestConcurrentWrites scrapes while many goroutines count, for the race
// detector, and checks the final page adds up.
func TestConcurrentWrites(t *testing.T) {
	reg := metrics.NewRegistry()
	c := reg.NewCounter("t_total", "Things.", "kind")
	h := reg.NewHistogram("t_seconds", "Time.", metrics.LatencyBuckets, "kind")
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				kind := []string{"a", "b"}[i%2]
				c.Inc(kind)
				h.Observe(float64(i%100)/10, kind)
			}
		}(w)
	}
	for i := 0; i < 20; i++ {
		var b strings.Builder
		reg.Write(&b)
		if _, err := promtext.Parse(strings.NewReader(b.String())); err != nil {
			t.Fatalf("page written while counting: %v", err)
		}
	}
	wg.Wait()
	var b strings.Builder
	reg.Write(&b)
	fams, err := promtext.Parse(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if got := fams.Sum("t_total"); got != 8000 {
		t.Errorf("t_total adds up to %v, want 8000", got)
	}
	if got := fams.Sum("t_seconds_count"); got != 8000 {
		t.Errorf("t_seconds_count adds up to %v, want 8000", got)
	}
}

func TestBadBucketsPanic(t *testing.T) {
	for _, b := range [][]float64{{1, 1}, {2, 1}, {1, math.Inf(1)}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("buckets %v were accepted", b)
				}
			}()
			metrics.NewRegistry().NewHistogram("x", "x", b)
		}()
	}
}

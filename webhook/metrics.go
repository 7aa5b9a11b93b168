package webhook

import (
	"time"

	"github.com/vcon-server/vcon-server/internal/metrics"
)

// Metrics are the sender's numbers on /metrics: no label names a tenant.
type Metrics struct {
	pending  *metrics.Gauge
	failedN  *metrics.Gauge
	attempts *metrics.Counter
	latency  *metrics.Histogram
}

// latencyBuckets are seconds from an event's commit to its delivery,
// from 10 ms to a day (retries run for hours).
var latencyBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 86400}

// NewMetrics registers the webhook metrics in reg.
func NewMetrics(reg *metrics.Registry) *Metrics {
	m := &Metrics{
		pending:  reg.NewGauge("vcon_webhook_events_pending", "Webhook events waiting to be delivered."),
		failedN:  reg.NewGauge("vcon_webhook_events_failed", "Webhook events that failed after the last attempt (webhook failed lists them)."),
		attempts: reg.NewCounter("vcon_webhook_attempts_total", "Webhook delivery attempts, by outcome: delivered, retry (tried again later), failed (the last attempt).", "outcome"),
		latency:  reg.NewHistogram("vcon_webhook_delivery_seconds", "Time from an event's commit to its delivery.", latencyBuckets),
	}
	for _, o := range []string{"delivered", "retry", "failed"} {
		m.attempts.Declare(o)
	}
	m.pending.Set(0)
	m.failedN.Set(0)
	return m
}

func (m *Metrics) delivered(age time.Duration) {
	if m != nil {
		m.attempts.Inc("delivered")
		m.latency.Observe(age.Seconds())
	}
}

func (m *Metrics) retried() {
	if m != nil {
		m.attempts.Inc("retry")
	}
}

func (m *Metrics) failed() {
	if m != nil {
		m.attempts.Inc("failed")
	}
}

func (m *Metrics) counts(pending, failed int) {
	if m != nil {
		m.pending.Set(float64(pending))
		m.failedN.Set(float64(failed))
	}
}

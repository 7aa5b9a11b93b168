package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/ids"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/seal"
)

// Policy is how the sender retries (docs/webhooks.md, "Retries").
type Policy struct {
	First    time.Duration // the wait after the first failed attempt
	Max      time.Duration // no wait is longer
	Attempts int           // after this many failed attempts the event is failed
	Timeout  time.Duration // of one attempt, answer included
}

// DefaultPolicy waits 1 s, 2 s, 4 s ... up to an hour between attempts,
// each wait drawn between half of it and all of it, and gives up after 30
// attempts: 9 to 18 hours after the first.
var DefaultPolicy = Policy{First: time.Second, Max: time.Hour, Attempts: 30, Timeout: 10 * time.Second}

// Wait is the wait after the n-th failed attempt (n from 1): First·2^(n-1),
// at most Max, then a random point between half of it and all of it, so
// that many events failed at once do not come back at once.
func (p Policy) Wait(n int) time.Duration {
	d := p.Max
	if n-1 < 40 && p.First<<(n-1) < p.Max && p.First<<(n-1) > 0 {
		d = p.First << (n - 1)
	}
	return d/2 + rand.N(d/2+1)
}

// Sender delivers the outbox. One runs in serve; it keeps nothing the
// catalog does not, so a restart resumes where the last process stopped.
type Sender struct {
	Cat     *catalog.Catalog
	Key     *seal.MasterKey // opens the secrets
	Log     *slog.Logger
	Metrics *Metrics
	Policy  Policy
	Now     func() time.Time

	mu      sync.Mutex
	clients map[string]*http.Client // by the endpoint's CA certificates ("" for the system's)
	warned  map[ids.ID]bool         // tenants whose secret does not open, warned once
	counted time.Time               // when the gauges were last counted
	outbox  int                     // the rows they counted
}

// batch bounds the events of one pass; workers, the attempts at once.
const (
	batch   = 64
	workers = 8
)

// Run delivers until ctx ends. Its first pass sends every pending event
// whatever its wait: a start resumes at once.
func (s *Sender) Run(ctx context.Context) {
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Policy == (Policy{}) {
		s.Policy = DefaultPolicy
	}
	// Far in the future: every pending event is due.
	horizon := time.Unix(1<<40, 0)
	lastCommits := ^uint64(0)
	idle := time.Time{}
	for ctx.Err() == nil {
		commits := s.Cat.Commits()
		now := s.Now()
		// Events are written by this process's commits, seen at once, or
		// by a command line's, seen within a second.
		if commits != lastCommits || !now.Before(idle) {
			lastCommits = commits
			n, err := s.pass(ctx, horizon)
			horizon = time.Time{}
			if err != nil && ctx.Err() == nil {
				s.Log.Warn("webhook: reading the outbox failed", "error", err.Error())
			}
			if n > 0 {
				continue
			}
			// Nothing sent: wait for a commit, the next event's time, or a
			// second (an event whose endpoint cannot be opened waits so).
			idle = s.Now().Add(time.Second)
			if next, ok, err := s.Cat.NextDue(ctx); err == nil && ok && next.Before(idle) && next.After(now) {
				idle = next
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// pass sends the events due at now (at horizon when it is set) and
// records what came of them in one commit; it returns how many it
// recorded.
func (s *Sender) pass(ctx context.Context, horizon time.Time) (int, error) {
	now := s.Now()
	due := now
	if !horizon.IsZero() {
		due = horizon
	}
	evs, err := s.Cat.DueEvents(ctx, due, batch)
	if err != nil || len(evs) == 0 {
		s.count(ctx)
		return 0, err
	}
	hooks := map[ids.ID]*endpoint{}
	for _, e := range evs {
		if _, ok := hooks[e.Tenant]; !ok {
			hooks[e.Tenant] = s.endpoint(ctx, e.Tenant)
		}
	}
	results := make([]catalog.Outcome, len(evs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, workers)
	for i, e := range evs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = s.attempt(ctx, hooks[e.Tenant], e)
		}()
	}
	wg.Wait()
	if err := s.Cat.RecordOutcomes(context.WithoutCancel(ctx), results); err != nil {
		return 0, err
	}
	n := 0
	for i, r := range results {
		if r.ID != 0 {
			n++
		}
		switch {
		case r.Delivered:
			s.Metrics.delivered(s.Now().Sub(evs[i].At))
		case r.Failed:
			s.Metrics.failed()
		case r.ID != 0:
			s.Metrics.retried()
		}
	}
	s.count(ctx)
	return n, nil
}

// count refreshes the gauges; a long outbox at most once a second, since
// counting it at every commit would cost more than the commits.
func (s *Sender) count(ctx context.Context) {
	if now := time.Now(); s.outbox < 1000 || now.Sub(s.counted) >= time.Second {
		s.counted = now
		if pending, failed, err := s.Cat.EventCounts(ctx); err == nil {
			s.outbox = pending + failed
			s.Metrics.counts(pending, failed)
		}
	}
}

// endpoint is a tenant's webhook as one pass sends to it; nil when it has
// none (turned off since) or its secret does not open.
type endpoint struct {
	url    string
	key    []byte
	client *http.Client
}

func (s *Sender) endpoint(ctx context.Context, tenant ids.ID) *endpoint {
	w, err := s.Cat.Webhook(ctx, tenant)
	if err != nil {
		return nil
	}
	sec, err := s.Key.OpenSecret(tenant, w.Secret)
	if err == nil {
		var key []byte
		if key, err = ParseSecret(string(sec)); err == nil {
			client, err := s.client(w.CAPEM)
			if err == nil {
				return &endpoint{url: w.URL, key: key, client: client}
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.warned == nil {
		s.warned = map[ids.ID]bool{}
	}
	if !s.warned[tenant] {
		s.warned[tenant] = true
		// No tenant in the log: the events wait, and webhook failed shows
		// nothing, so the operator sets the webhook again (docs/webhooks.md).
		s.Log.Warn("webhook: a tenant's webhook secret does not open with this master key (a rotation?); its events wait until the webhook is set again", "error", err.Error())
	}
	return nil
}

// client returns the HTTP client that trusts caPEM (the system's roots
// when empty), one per set of roots, keeping its connections.
func (s *Sender) client(caPEM string) (*http.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[caPEM]; ok {
		return c, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caPEM != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(caPEM)) {
			return nil, errors.New("the webhook's CA file holds no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	c := &http.Client{
		Timeout: s.Policy.Timeout,
		Transport: &http.Transport{TLSClientConfig: cfg, MaxIdleConnsPerHost: workers, IdleConnTimeout: time.Minute,
			ForceAttemptHTTP2: true, TLSHandshakeTimeout: s.Policy.Timeout},
		// A redirect is an answer like any other: not taken, so a signed
		// event never goes where the operator did not set.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if s.clients == nil {
		s.clients = map[string]*http.Client{}
	}
	s.clients[caPEM] = c
	return c, nil
}

// attempt sends one event once and says what to record.
func (s *Sender) attempt(ctx context.Context, ep *endpoint, e catalog.Event) catalog.Outcome {
	if ep == nil {
		// No endpoint: a webhook turned off dropped the rows already, so
		// this is a secret that does not open; the event waits.
		return catalog.Outcome{}
	}
	body := Payload(e)
	err := s.post(ctx, ep, e.MsgID, body)
	if err == nil {
		crashpoint.Hit(crashpoint.WebhookAfterDelivery)
		return catalog.Outcome{ID: e.ID, Delivered: true}
	}
	if ctx.Err() != nil {
		return catalog.Outcome{}
	}
	n := e.Attempts + 1
	out := catalog.Outcome{ID: e.ID, Attempts: n, Error: err.Error()}
	if n >= s.Policy.Attempts {
		out.Failed = true
		s.Log.Warn("webhook: an event failed after the last attempt; vcon-server webhook failed lists it, webhook retry sends it again", "type", e.Type, "attempts", n, "error", err.Error())
	} else {
		out.Next = s.Now().Add(s.Policy.Wait(n))
		s.Log.Debug("webhook: an attempt failed; it is tried again", "type", e.Type, "attempts", n, "error", err.Error())
	}
	return out
}

// post makes one signed POST; any answer but a 2xx is an error whose text
// names no URL (it reaches the log and the outbox).
func (s *Sender) post(ctx context.Context, ep *endpoint, msgID string, body []byte) error {
	now := s.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "vcon-server")
	h.Set("webhook-id", msgID)
	h.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	h.Set("webhook-signature", Sign(ep.key, msgID, now, body))
	resp, err := ep.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("no answer: %w", err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("answered %d", resp.StatusCode)
	}
	return nil
}

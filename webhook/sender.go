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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
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
	Rules   Rules // where deliveries may go
	Now     func() time.Time
	// Checkpoint is the signed checkpoint of size records of a tenant's
	// audit log and the log's origin, for an audit.checkpoint event's body
	// (auditlog.Logs.CheckpointAt); without it such an event is retried.
	Checkpoint func(ctx context.Context, tenant ids.ID, size uint64) (origin string, note []byte, err error)

	mu      sync.Mutex
	clients map[clientKey]*http.Client
	warned  map[ids.ID]bool // tenants whose webhook the rules refuse, warned once
	cursor  ids.ID          // the last tenant an attempt began for: the next look starts after it
	counted time.Time       // when the gauges were last counted
	outbox  int             // the rows they counted
}

// clientKey tells the clients apart: by the endpoint's CA certificates
// ("" for the system's), and whether it is plain http, which may go to an
// allowed loopback address only.
type clientKey struct {
	caPEM string
	plain bool
}

// workers bounds the attempts at once, perTenant those of one tenant, so
// that a slow endpoint holds back its own tenant's events only; look
// bounds the due events read at a time beyond those in flight. Each look
// reads up to perTenant events of each tenant in turn, and gives a free
// worker to a tenant with fewer attempts in flight first: a tenant with
// none waits at most until some attempt ends, one attempt's timeout,
// however many events other tenants have behind slow endpoints.
const (
	workers   = 8
	perTenant = workers / 2
	look      = 64
	pace      = 10 * time.Millisecond
)

// result is an attempt's outcome, with what the metrics need.
type result struct {
	out    catalog.Outcome
	event  catalog.Event
	tenant ids.ID
}

// Run delivers until ctx ends. Its first look sends every pending event
// whatever its wait: a start resumes at once.
//
// Attempts run beside the loop; their outcomes are recorded in one commit
// per turn of it. An event stays in flight until its outcome is
// committed, and a vCon's next event is due only once the one before it
// is delivered (or failed), so a vCon's events go out in order.
func (s *Sender) Run(ctx context.Context) {
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Policy == (Policy{}) {
		s.Policy = DefaultPolicy
	}
	results := make(chan result, workers)
	inflight := map[int64]bool{}
	perT := map[ids.ID]int{}
	var wg sync.WaitGroup
	defer wg.Wait()
	// Far in the future: every pending event is due.
	horizon := time.Unix(1<<40, 0)
	lastCommits := ^uint64(0)
	idle := time.Time{}
	var done []result
	var recorded, looked time.Time
	for ctx.Err() == nil {
		// Record what finished, in one commit: at once when nothing else is
		// in flight, else at most every `pace`, so that a busy sender
		// commits its outcomes together rather than one by one.
	drain:
		for {
			select {
			case r := <-results:
				done = append(done, r)
			default:
				break drain
			}
		}
		if len(done) > 0 && (len(done) == len(inflight) || time.Since(recorded) >= pace) {
			recorded = time.Now()
			s.record(ctx, done)
			for _, r := range done {
				delete(inflight, r.event.ID)
				perT[r.tenant]--
			}
			done = done[:0]
			lastCommits = ^uint64(0) // look again: the vCons' next events may be due
		}
		commits := s.Cat.Commits()
		now := s.Now()
		// Events are written by this process's commits, seen at once, or
		// by a command line's, seen within a second.
		if len(inflight) < workers && (commits != lastCommits || !now.Before(idle)) && (len(inflight) == 0 || time.Since(looked) >= pace) {
			lastCommits, looked = commits, time.Now()
			due := now
			if !horizon.IsZero() {
				due, horizon = horizon, time.Time{}
			}
			if _, err := s.start(ctx, due, inflight, perT, results, &wg); err != nil && ctx.Err() == nil {
				s.Log.Warn("webhook: reading the outbox failed", "error", err.Error())
			}
			s.count(ctx)
			// Look again at a commit, an attempt's end, the next event's
			// time, or within a second: an event held back by its
			// tenant's bound waits for one of its attempts to end.
			idle = s.Now().Add(time.Second)
			if next, ok, err := s.Cat.NextDue(ctx); err == nil && ok && next.Before(idle) && next.After(now) {
				idle = next
			}
		}
		select {
		case <-ctx.Done():
		case r := <-results:
			done = append(done, r) // recorded at the top of the loop
		case <-time.After(pace):
		}
	}
}

// start begins attempts for the events due at due that are not in flight,
// within the bounds, and returns how many it began. The catalog reads
// each tenant's oldest due events in turn, from the one after the tenant
// last served; the free workers go first to the tenants with the fewest
// attempts in flight, in that order.
func (s *Sender) start(ctx context.Context, due time.Time, inflight map[int64]bool, perT map[ids.ID]int, results chan<- result, wg *sync.WaitGroup) (int, error) {
	evs, err := s.Cat.DueEvents(ctx, due, s.cursor, perTenant, look+len(inflight))
	if err != nil {
		return 0, err
	}
	type lane struct {
		tenant ids.ID
		ep     *endpoint
		evs    []catalog.Event
	}
	var lanes []*lane
	for _, e := range evs {
		if inflight[e.ID] {
			continue
		}
		if len(lanes) == 0 || lanes[len(lanes)-1].tenant != e.Tenant {
			lanes = append(lanes, &lane{tenant: e.Tenant})
		}
		l := lanes[len(lanes)-1]
		l.evs = append(l.evs, e)
	}
	n, last := 0, -1
	for level := 0; level < perTenant && len(inflight) < workers; level++ {
		for i, l := range lanes {
			if len(inflight) >= workers {
				break
			}
			if len(l.evs) == 0 || perT[l.tenant] > level {
				continue
			}
			if l.ep == nil {
				if l.ep = s.endpoint(ctx, l.tenant); l.ep == nil {
					l.evs = nil // parked: its events wait
					continue
				}
			}
			e, ep := l.evs[0], l.ep
			l.evs = l.evs[1:]
			inflight[e.ID] = true
			perT[e.Tenant]++
			n++
			last = max(last, i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				results <- result{out: s.attempt(ctx, ep, e), event: e, tenant: e.Tenant}
			}()
		}
	}
	if last >= 0 {
		s.cursor = lanes[last].tenant
	}
	return n, nil
}

// record commits what attempts came to, and counts them.
func (s *Sender) record(ctx context.Context, done []result) {
	outs := make([]catalog.Outcome, len(done))
	for i, r := range done {
		outs[i] = r.out
	}
	if err := s.Cat.RecordOutcomes(context.WithoutCancel(ctx), outs); err != nil {
		// Nothing recorded: the events are sent again, under their ids.
		s.Log.Warn("webhook: recording deliveries failed; they will be sent again", "error", err.Error())
		return
	}
	for _, r := range done {
		switch {
		case r.out.Delivered:
			s.Metrics.delivered(s.Now().Sub(r.event.At))
		case r.out.Failed:
			s.Metrics.failed()
		case r.out.ID != 0:
			s.Metrics.retried()
		}
	}
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
// none (turned off since) or it is parked.
type endpoint struct {
	url     string
	key     []byte
	client  *http.Client
	refused string // why the rules refuse its URL: its events fail at once
}

func (s *Sender) endpoint(ctx context.Context, tenant ids.ID) *endpoint {
	w, err := s.Cat.Webhook(ctx, tenant)
	if err != nil {
		return nil
	}
	ep, err := s.open(w)
	if err != nil {
		// Parked: the catalog leaves its events out of every look until
		// the webhook is set again, and tenant show says why. No tenant
		// in the log.
		why := "parked: its secret does not open with this master key (" + err.Error() + "); its events wait until the webhook is set again (tenant set-webhook)"
		if perr := s.Cat.ParkWebhook(ctx, w, why); perr != nil {
			s.Log.Warn("webhook: parking a webhook failed", "error", perr.Error())
		}
		s.Log.Warn("webhook: a tenant's webhook secret does not open with this master key (a rotation?); its events wait until the webhook is set again", "error", err.Error())
		return nil
	}
	if err := s.Rules.CheckURL(w.URL); err != nil {
		ep.refused = refusedText(err)
		s.mu.Lock()
		if s.warned == nil {
			s.warned = map[ids.ID]bool{}
		}
		first := !s.warned[tenant]
		s.warned[tenant] = true
		s.mu.Unlock()
		if first {
			s.Log.Warn("webhook: a tenant's webhook URL is one the rules refuse; its events fail at once (webhook failed lists them)", "error", ep.refused)
		}
	}
	return ep
}

// refusedText is what an event of a webhook whose URL the rules refuse
// fails with: the rule, without the URL.
func refusedText(err error) string {
	var r *refusedURL
	if errors.As(err, &r) {
		return "address not allowed: " + r.why
	}
	return "address not allowed"
}

// open makes the endpoint of a webhook's row: its secret opened, its
// client made.
func (s *Sender) open(w catalog.Webhook) (*endpoint, error) {
	sec, err := s.Key.OpenSecret(w.Tenant, w.Secret)
	if err != nil {
		return nil, err
	}
	key, err := ParseSecret(string(sec))
	if err != nil {
		return nil, err
	}
	client, err := s.client(clientKey{caPEM: w.CAPEM, plain: strings.HasPrefix(w.URL, "http:")})
	if err != nil {
		return nil, err
	}
	return &endpoint{url: w.URL, key: key, client: client}, nil
}

// roots are the certificates of caPEM; nil (the system's) when empty.
func roots(caPEM string) (*x509.CertPool, error) {
	if caPEM == "" {
		return nil, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(caPEM)) {
		return nil, errors.New("the webhook's CA file holds no PEM certificate")
	}
	return pool, nil
}

// maxHeaderBytes bounds an answer's headers: a receiver has nothing to
// say in them.
const maxHeaderBytes = 16 << 10

// client returns the HTTP client of k, one each, keeping its connections.
// It connects where the rules allow only, never through a proxy (a proxy
// from the environment would connect for it, wherever a URL said), and
// takes no redirect.
func (s *Sender) client(k clientKey) (*http.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[k]; ok {
		return c, nil
	}
	pool, err := roots(k.caPEM)
	if err != nil {
		return nil, err
	}
	c := &http.Client{
		Timeout: s.Policy.Timeout,
		Transport: &http.Transport{
			Proxy:                  nil,
			DialContext:            s.Rules.dialer(k.plain, s.Policy.Timeout).DialContext,
			TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool},
			MaxIdleConnsPerHost:    workers,
			IdleConnTimeout:        time.Minute,
			ForceAttemptHTTP2:      true,
			TLSHandshakeTimeout:    s.Policy.Timeout,
			MaxResponseHeaderBytes: maxHeaderBytes,
		},
		// A redirect is an answer like any other: not taken, so a signed
		// event never goes where the operator did not set.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if s.clients == nil {
		s.clients = map[clientKey]*http.Client{}
	}
	s.clients[k] = c
	return c, nil
}

// attempt sends one event once and says what to record.
func (s *Sender) attempt(ctx context.Context, ep *endpoint, e catalog.Event) catalog.Outcome {
	if ep == nil {
		// No endpoint: a webhook turned off dropped the rows already, so
		// this is a secret that does not open; the event waits.
		return catalog.Outcome{}
	}
	n := e.Attempts + 1
	if ep.refused != "" {
		// No attempt can succeed until the rules change: failed now, for
		// webhook failed to list and webhook retry to send again.
		return catalog.Outcome{ID: e.ID, Attempts: n, Failed: true, Error: ep.refused}
	}
	body, err := s.payload(ctx, e)
	if err == nil {
		err = s.post(ctx, ep, e.MsgID, body)
	}
	if err == nil {
		crashpoint.Hit(crashpoint.WebhookAfterDelivery)
		return catalog.Outcome{ID: e.ID, Delivered: true}
	}
	if ctx.Err() != nil {
		return catalog.Outcome{}
	}
	out := catalog.Outcome{ID: e.ID, Attempts: n, Error: err.Error()}
	if errors.Is(err, errNotAllowed) {
		out.Failed = true // what the name resolved to is refused: as above
	}
	if out.Failed || n >= s.Policy.Attempts {
		out.Failed = true
		s.Log.Warn("webhook: an event failed after the last attempt; vcon-server webhook failed lists it, webhook retry sends it again", "type", e.Type, "attempts", n, "error", err.Error())
	} else {
		out.Next = s.Now().Add(s.Policy.Wait(n))
		s.Log.Debug("webhook: an attempt failed; it is tried again", "type", e.Type, "attempts", n, "error", err.Error())
	}
	return out
}

// payload is an event's body: the same bytes on every attempt, an
// audit.checkpoint's too (its note made again at its size signs the
// same).
func (s *Sender) payload(ctx context.Context, e catalog.Event) ([]byte, error) {
	if e.Type != catalog.EventCheckpoint {
		return Payload(e), nil
	}
	if s.Checkpoint == nil {
		return nil, errors.New("this process does not sign the audit logs")
	}
	origin, note, err := s.Checkpoint(ctx, e.Tenant, e.Size)
	if err != nil {
		return nil, fmt.Errorf("reading the checkpoint: %w", err)
	}
	return CheckpointPayload(e, origin, note), nil
}

// post makes one signed POST; any answer but a 2xx is an error whose text
// names no URL, address or port (it reaches the log and the outbox).
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
		return &attemptError{reason(err), err}
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("answered %d", resp.StatusCode)
	}
	return nil
}

// attemptError is an attempt that got no answer: its text is the reason
// alone (no address), its cause kept for errors.Is.
type attemptError struct {
	text  string
	cause error
}

func (e *attemptError) Error() string { return "no answer: " + e.text }
func (e *attemptError) Unwrap() error { return e.cause }

// Package faultproxy is a TLS reverse proxy for tests that sits in front of
// a real S3 server and, by rule, breaks some of the requests it passes on:
// it answers 500 or 503, resets the connection, delays, cuts an answer's
// body short, or lets the server do the work and then drops the answer.
// The code above the object store must turn each of these into either a
// success (the client's retries absorbed it) or a clean failure, and never
// into a lost or damaged version.
//
// The proxy forwards the Host header as the client sent it: the client
// signs its requests for the proxy's address, and S3 servers (versitygw,
// MinIO) check the signature against the Host they receive, not against
// the address they listen on.
package faultproxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/testcert"
)

// Fault is what the proxy does to a request a rule picked.
type Fault string

const (
	// Status500 answers 500 InternalError without forwarding.
	Status500 Fault = "500"
	// Status503 answers 503 SlowDown without forwarding.
	Status503 Fault = "503"
	// Quota answers 403 QuotaExceeded without forwarding: the bucket's
	// quota (Ceph's answer; MinIO answers 507 XMinioStorageFull).
	Quota Fault = "quota"
	// Reset closes the connection with a TCP reset without forwarding.
	Reset Fault = "reset"
	// Delay waits Rule.Delay, then forwards.
	Delay Fault = "delay"
	// CutBody forwards, sends the answer's status, headers and half its
	// body, then cuts the connection: the client sees a short body.
	CutBody Fault = "cut-body"
	// DropResponse forwards and reads the whole answer (the server did the
	// work), then cuts the connection without answering: the client cannot
	// tell whether its request took effect.
	DropResponse Fault = "drop-response"
)

// Faults lists every kind, for reports.
var Faults = []Fault{Status500, Status503, Quota, Reset, Delay, CutBody, DropResponse}

// Rule picks requests and says what to do to them. A request is tested
// against the rules in order; the first rule that matches and fires
// decides.
type Rule struct {
	// Method and Path are regular expressions matched against the request
	// method and its escaped path (with the query after '?', when it has
	// one); empty matches every request.
	Method, Path string
	Fault        Fault
	// Every fires on every nth matching request (1: every one). Else Prob
	// is the chance per matching request; with both zero the rule always
	// fires.
	Every int
	Prob  float64
	// Count stops the rule after this many faults (0: no limit).
	Count int
	// Delay is how long Fault Delay waits (one second when zero).
	Delay time.Duration
}

type rule struct {
	Rule
	method, path     *regexp.Regexp
	matched, applied int
}

// Options shape a proxy.
type Options struct {
	// Seed makes the probabilistic rules repeatable (a random seed when
	// zero; Seed() tells it).
	Seed uint64
	// Listen is the address to listen on ("127.0.0.1:0" when empty). Only
	// loopback addresses are accepted: the proxy is a test tool.
	Listen string
}

// Proxy is a running fault proxy.
type Proxy struct {
	// URL is https://127.0.0.1:PORT: point the S3 client's endpoint here.
	URL string
	// CAPEM is the certificate of the CA that signed the proxy's
	// certificate (for 127.0.0.1, ::1 and localhost).
	CAPEM []byte

	seed  uint64
	ln    net.Listener
	srv   *http.Server
	rp    *httputil.ReverseProxy
	mu    sync.Mutex
	rnd   *rand.Rand
	rules []*rule
	stats Stats
	wg    sync.WaitGroup
}

// Stats count what the proxy saw and did.
type Stats struct {
	Requests  int           // every request received
	Forwarded int           // requests passed on to the server
	Faults    map[Fault]int // faults applied, by kind
}

// Total is the number of faults applied.
func (s Stats) Total() int {
	n := 0
	for _, v := range s.Faults {
		n += v
	}
	return n
}

// String is "requests=N forwarded=N 503=N reset=N ...".
func (s Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "requests=%d forwarded=%d", s.Requests, s.Forwarded)
	keys := make([]string, 0, len(s.Faults))
	for k := range s.Faults {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, s.Faults[Fault(k)])
	}
	return b.String()
}

type faultKey struct{}

type decided struct {
	fault Fault
	delay time.Duration
}

var errDrop = errors.New("faultproxy: answer dropped")

// Start runs a proxy in front of upstream (https://host:port), trusting
// upstreamCA (PEM; the system roots when empty) for it.
func Start(upstream string, upstreamCA []byte, opt Options) (*Proxy, error) {
	target, err := url.Parse(upstream)
	if err != nil || target.Host == "" {
		return nil, fmt.Errorf("faultproxy: upstream %q: want https://host:port", upstream)
	}
	listen := opt.Listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	if err := loopbackOnly(listen); err != nil {
		return nil, err
	}
	pair, err := testcert.New("faultproxy test CA")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: certificate: %w", err)
	}
	cert, err := pair.TLS()
	if err != nil {
		return nil, fmt.Errorf("faultproxy: certificate: %w", err)
	}
	caPEM := pair.CAPEM
	upTLS := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(upstreamCA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(upstreamCA) {
			return nil, errors.New("faultproxy: no PEM certificate in the upstream CA")
		}
		upTLS.RootCAs = pool
	}
	seed := opt.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	p := &Proxy{CAPEM: caPEM, seed: seed, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		stats: Stats{Faults: map[Fault]int{}}}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// The client signed the Host it sent (the proxy's); the server
			// checks the signature against the Host it receives.
			pr.Out.Host = pr.In.Host
		},
		Transport: &http.Transport{
			TLSClientConfig:     upTLS,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     30 * time.Second,
		},
		ModifyResponse: p.modify,
		ErrorHandler:   p.proxyError,
		ErrorLog:       quietLog(),
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p.ln = ln
	p.URL = "https://" + ln.Addr().String()
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          quietLog(),
		// HTTP/1.1 only: faults need to hijack the connection.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	tlsLn := tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.srv.Serve(tlsLn)
	}()
	return p, nil
}

// Seed is the seed of the probabilistic rules, to repeat a run.
func (p *Proxy) Seed() uint64 { return p.seed }

// WriteCA writes CAPEM to path (mode 0600), for a configuration's ca_file.
func (p *Proxy) WriteCA(path string) error { return os.WriteFile(path, p.CAPEM, 0o600) }

// Close stops the proxy and cuts every connection.
func (p *Proxy) Close() error {
	err := p.srv.Close()
	p.wg.Wait()
	return err
}

// SetRules replaces the rules (none: every request is forwarded as is).
func (p *Proxy) SetRules(rules ...Rule) error {
	rs := make([]*rule, 0, len(rules))
	for _, r := range rules {
		x := &rule{Rule: r}
		var err error
		if r.Method != "" {
			if x.method, err = regexp.Compile(r.Method); err != nil {
				return fmt.Errorf("faultproxy: method %q: %w", r.Method, err)
			}
		}
		if r.Path != "" {
			if x.path, err = regexp.Compile(r.Path); err != nil {
				return fmt.Errorf("faultproxy: path %q: %w", r.Path, err)
			}
		}
		if !knownFault(r.Fault) {
			return fmt.Errorf("faultproxy: unknown fault %q", r.Fault)
		}
		rs = append(rs, x)
	}
	p.mu.Lock()
	p.rules = rs
	p.mu.Unlock()
	return nil
}

// Clear removes every rule: from now on the proxy only forwards.
func (p *Proxy) Clear() { p.SetRules() }

// Stats returns a copy of the counts so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Faults = make(map[Fault]int, len(p.stats.Faults))
	for k, v := range p.stats.Faults {
		s.Faults[k] = v
	}
	return s
}

func knownFault(f Fault) bool {
	for _, k := range Faults {
		if k == f {
			return true
		}
	}
	return false
}

// decide counts the request and picks its fault, if any.
func (p *Proxy) decide(r *http.Request) (decided, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Requests++
	target := r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	for _, x := range p.rules {
		if x.method != nil && !x.method.MatchString(r.Method) || x.path != nil && !x.path.MatchString(target) {
			continue
		}
		if x.Count > 0 && x.applied >= x.Count {
			continue
		}
		x.matched++
		fire := true
		switch {
		case x.Every > 0:
			fire = x.matched%x.Every == 0
		case x.Prob > 0:
			fire = p.rnd.Float64() < x.Prob
		}
		if !fire {
			continue
		}
		x.applied++
		p.stats.Faults[x.Fault]++
		d := x.Delay
		if d <= 0 {
			d = time.Second
		}
		return decided{fault: x.Fault, delay: d}, true
	}
	return decided{}, false
}

func (p *Proxy) forwarded() {
	p.mu.Lock()
	p.stats.Forwarded++
	p.mu.Unlock()
}

// ServeHTTP applies the fault a rule picks, or forwards.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d, ok := p.decide(r)
	if ok {
		switch d.fault {
		case Status500:
			s3Error(w, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
			return
		case Status503:
			s3Error(w, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
			return
		case Quota:
			s3Error(w, http.StatusForbidden, "QuotaExceeded", "The bucket's quota is exceeded.")
			return
		case Reset:
			reset(w)
			return
		case Delay:
			t := time.NewTimer(d.delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		r = r.WithContext(context.WithValue(r.Context(), faultKey{}, d.fault))
		if d.fault == CutBody {
			// The status line and the bytes before the cut must reach the
			// client before the connection is cut, not sit in a buffer.
			w = &flushWriter{w}
		}
	}
	p.forwarded()
	p.rp.ServeHTTP(w, r)
}

// modify applies the faults that act on the server's answer.
func (p *Proxy) modify(resp *http.Response) error {
	f, _ := resp.Request.Context().Value(faultKey{}).(Fault)
	switch f {
	case DropResponse:
		// Let the server finish sending, so its side of the request is
		// complete, then answer nothing.
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return errDrop
	case CutBody:
		keep := int64(0)
		if resp.ContentLength > 0 {
			keep = resp.ContentLength / 2
		}
		resp.Body = &cutBody{r: io.LimitReader(resp.Body, keep), c: resp.Body}
	}
	return nil
}

// cutBody ends with an error after its limit, which makes the reverse
// proxy abort the answer: the connection is cut mid-body.
type cutBody struct {
	r io.Reader
	c io.Closer
}

func (b *cutBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		err = errors.New("faultproxy: body cut")
	}
	return n, err
}

func (b *cutBody) Close() error { return b.c.Close() }

// flushWriter sends everything written at once.
type flushWriter struct{ http.ResponseWriter }

func (w *flushWriter) WriteHeader(code int) {
	w.ResponseWriter.WriteHeader(code)
	http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *flushWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	http.NewResponseController(w.ResponseWriter).Flush()
	return n, err
}

func (w *flushWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (p *Proxy) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, errDrop) {
		reset(w)
		return
	}
	if r.Context().Err() != nil {
		return
	}
	s3Error(w, http.StatusBadGateway, "BadGateway", "faultproxy: the upstream server did not answer")
}

// reset closes the client's connection with a TCP reset (linger 0), as a
// crashed or overloaded server's kernel would.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	nc := conn
	if tc, ok := conn.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	if tcp, ok := nc.(*net.TCPConn); ok {
		tcp.SetLinger(0)
	}
	conn.Close()
}

func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><RequestId>faultproxy</RequestId></Error>`, code, msg)
}

// loopbackOnly refuses a listen address off loopback.
func loopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("faultproxy: listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("faultproxy: listen address %q is not on loopback", addr)
	}
	return nil
}

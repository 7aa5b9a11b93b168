package s3sig

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// Config says where the service is and how to reach it.
type Config struct {
	// Endpoint is the service's base URL, "https://objects.example.com:9000".
	Endpoint string
	// Region is signed into every request ("us-east-1" when empty).
	Region      string
	Credentials Credentials
	// PathStyle puts the bucket in the path (https://host/bucket/key) rather
	// than in the host name (https://bucket.host/key). Self-hosted servers
	// usually need it.
	PathStyle bool

	// CAFile or CAPEM name a private CA (PEM). When set, only that CA is
	// trusted for the service: a private S3 has no business presenting a
	// public CA's certificate, so the system roots are left out.
	CAFile string
	CAPEM  []byte

	// ConnectTimeout bounds dialing and the TLS handshake (10s when zero).
	ConnectTimeout time.Duration
	// ResponseTimeout bounds the wait for an answer's headers once the
	// request is sent (2m when zero). The whole request, retries
	// included, is bounded by the caller's context deadline.
	ResponseTimeout time.Duration
	// MaxRetries is how many times a failed request is sent again (4 when
	// zero; negative for none).
	MaxRetries int
	// RetryBase and RetryMax shape the backoff: before retry n the client
	// sleeps a random time in [0, min(RetryMax, RetryBase*2^n)) ("full
	// jitter", so that many clients that failed together do not retry
	// together). 100ms and 5s when zero.
	RetryBase, RetryMax time.Duration

	// Transport replaces the HTTP transport (tests); the TLS and timeout
	// settings above do not apply to it.
	Transport http.RoundTripper
}

// Client calls one S3 service. It is safe for concurrent use.
type Client struct {
	endpoint   *url.URL
	basePath   string
	pathStyle  bool
	signer     *Signer
	http       *http.Client
	maxRetries int
	retryBase  time.Duration
	retryMax   time.Duration
	now        func() time.Time
}

// New returns a client for cfg.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("s3: endpoint: %w", err)
	}
	if u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("s3: endpoint %q: want https://host[:port]", cfg.Endpoint)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("s3: endpoint %q: a query or fragment has no place there", cfg.Endpoint)
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	c := &Client{
		endpoint:   u,
		basePath:   strings.TrimSuffix(u.Path, "/"),
		pathStyle:  cfg.PathStyle,
		signer:     NewS3Signer(cfg.Credentials, region),
		maxRetries: cfg.MaxRetries,
		retryBase:  cfg.RetryBase,
		retryMax:   cfg.RetryMax,
		now:        time.Now,
	}
	if c.maxRetries == 0 {
		c.maxRetries = 4
	} else if c.maxRetries < 0 {
		c.maxRetries = 0
	}
	if c.retryBase <= 0 {
		c.retryBase = 100 * time.Millisecond
	}
	if c.retryMax <= 0 {
		c.retryMax = 5 * time.Second
	}
	rt := cfg.Transport
	if rt == nil {
		rt, err = newTransport(cfg)
		if err != nil {
			return nil, err
		}
	}
	c.http = &http.Client{
		Transport: rt,
		// S3 answers redirects only for a wrong region or addressing; a
		// signed request cannot follow one (the host is signed), so the
		// answer is returned as an error instead.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c, nil
}

// MaxResponseHeaderBytes bounds the headers of an answer.
const MaxResponseHeaderBytes = 16 << 10

func newTransport(cfg Config) (*http.Transport, error) {
	connect := cfg.ConnectTimeout
	if connect <= 0 {
		connect = 10 * time.Second
	}
	respTimeout := cfg.ResponseTimeout
	if respTimeout <= 0 {
		respTimeout = 2 * time.Minute
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	pem := cfg.CAPEM
	if cfg.CAFile != "" {
		b, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("s3: CA file: %w", err)
		}
		pem = append(append([]byte{}, pem...), b...)
	}
	if len(pem) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("s3: CA file: no PEM certificate in it")
		}
		tlsConf.RootCAs = pool
	}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tlsConf,
		TLSHandshakeTimeout:   connect,
		ResponseHeaderTimeout: respTimeout,
		ExpectContinueTimeout: time.Second,
		// Objects come back byte for byte: without this the transport
		// asks for gzip and silently unzips an answer whose
		// Content-Encoding says gzip, changing both bytes and lengths.
		DisableCompression: true,
		ForceAttemptHTTP2:  true,
		MaxIdleConns:       128,
		// The store runs many requests at once against one host; the
		// default of 2 idle connections per host would close and reopen
		// TLS connections all the time.
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		// An S3 answer's headers are a few hundred bytes: a service that
		// sends megabytes of them is refused, not buffered.
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
	}, nil
}

// request is one S3 call before signing.
type request struct {
	op      string
	method  string
	bucket  string
	key     string // "" for a bucket call
	query   string // canonical raw query (see Query)
	header  http.Header
	body    io.ReadSeeker // nil for none
	size    int64
	payload string // hex SHA-256 of the body, or UnsignedPayload; "" to choose
	// ok lists the statuses that mean success besides 200.
	ok []int
}

// url builds the request URL. The path is sent exactly as it is signed
// (RawPath), so no layer re-encodes a key differently from the signature.
func (c *Client) url(bucket, key string) *url.URL {
	u := &url.URL{Scheme: c.endpoint.Scheme, Host: c.endpoint.Host}
	p := c.basePath + "/"
	if bucket == "" {
		// The service itself (ListBuckets).
	} else if c.pathStyle {
		p += bucket
		if key != "" {
			p += "/" + key
		}
	} else {
		u.Host = bucket + "." + c.endpoint.Host
		p += key
	}
	u.Path = p
	u.RawPath = EscapePath(p)
	return u
}

// do sends r, retrying as retryable() and transport failures allow, and
// returns a successful answer with its body unread. Any other answer
// becomes an *Error.
func (c *Client) do(ctx context.Context, r *request) (*http.Response, error) {
	var start int64
	if r.body != nil {
		var err error
		if start, err = r.body.Seek(0, io.SeekCurrent); err != nil {
			return nil, fmt.Errorf("s3: %s: body: %w", r.op, err)
		}
	}
	payload := r.payload
	switch {
	case r.body == nil:
		payload = EmptySHA256
	case payload != "":
	case c.endpoint.Scheme == "https":
		payload = UnsignedPayload
	default:
		// Over plain HTTP nothing else protects the body, so it is hashed
		// and signed (see UnsignedPayload).
		h := sha256.New()
		if _, err := io.Copy(h, io.LimitReader(r.body, r.size)); err != nil {
			return nil, fmt.Errorf("s3: %s: hashing the body: %w", r.op, err)
		}
		payload = hex.EncodeToString(h.Sum(nil))
	}

	for attempt := 1; ; attempt++ {
		resp, err := c.send(ctx, r, start, payload)
		if err == nil {
			return resp, nil
		}
		var se *Error
		if errors.As(err, &se) {
			se.Attempts = attempt
		}
		retry := se != nil && se.retryable() || se == nil && transient(ctx, err)
		if !retry || attempt > c.maxRetries {
			return nil, err
		}
		if cerr := c.backoff(ctx, attempt); cerr != nil {
			return nil, fmt.Errorf("%w; gave up retrying: %w", err, cerr)
		}
	}
}

var errBodyRewind = errors.New("cannot rewind the body")

// transient reports whether a request that got no answer may succeed when
// sent again: a refused or broken connection may, a certificate the CA
// does not sign will not, nor a request whose context is over.
func transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, errBodyRewind) {
		return false
	}
	var certErr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	if errors.As(err, &certErr) || errors.As(err, &unknownCA) || errors.As(err, &hostErr) {
		return false
	}
	return true
}

// send makes one attempt.
func (c *Client) send(ctx context.Context, r *request, start int64, payload string) (*http.Response, error) {
	var body *attemptBody
	if r.body != nil {
		if _, err := r.body.Seek(start, io.SeekStart); err != nil {
			return nil, fmt.Errorf("s3: %s: %w: %w", r.op, errBodyRewind, err)
		}
		body = &attemptBody{r: io.LimitReader(r.body, r.size)}
		// Whatever the transport still does with this attempt's body, it
		// must not read the seeker once the next attempt rewinds it.
		defer body.detach()
	}
	req, err := http.NewRequestWithContext(ctx, r.method, "", nil)
	if err != nil {
		return nil, fmt.Errorf("s3: %s: %w", r.op, err)
	}
	req.URL = c.url(r.bucket, r.key)
	req.URL.RawQuery = r.query
	req.Host = req.URL.Host
	for k, vs := range r.header {
		req.Header[k] = append([]string(nil), vs...)
	}
	if body != nil {
		req.ContentLength = r.size
		req.Body = body
		if r.size == 0 {
			// A zero length with a body would be sent chunked.
			req.Body = http.NoBody
		}
	}
	c.signer.Sign(req, payload, c.now())

	resp, err := c.http.Do(req)
	if err != nil {
		// *url.Error's text holds the URL, and so the key: keep only
		// the cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("s3: %s: %w", r.op, err)
	}
	if resp.StatusCode == http.StatusOK || contains(r.ok, resp.StatusCode) {
		return resp, nil
	}
	// Error bodies are small; a larger one is not an S3 error document.
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return nil, newError(r.op, resp, b, r.key)
}

func contains(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// backoff sleeps before retry n (1 for the first), full jitter.
func (c *Client) backoff(ctx context.Context, n int) error {
	ceiling := c.retryMax
	if n < 31 && c.retryBase<<n > 0 && c.retryBase<<n < ceiling {
		ceiling = c.retryBase << n
	}
	t := time.NewTimer(rand.N(ceiling))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// attemptBody is one attempt's view of a request body. Once detached it
// reads nothing, so a transport goroutine that outlives its attempt cannot
// race the next attempt's rewind.
type attemptBody struct {
	mu       sync.Mutex
	r        io.Reader
	detached bool
}

func (b *attemptBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.detached {
		return 0, errors.New("s3: request body read after its attempt ended")
	}
	return b.r.Read(p)
}

func (b *attemptBody) Close() error {
	b.detach()
	return nil
}

func (b *attemptBody) detach() {
	b.mu.Lock()
	b.detached = true
	b.mu.Unlock()
}

// readBody reads a small answer body (XML documents) and closes it.
func readBody(op string, resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, fmt.Errorf("s3: %s: reading the answer: %w", op, err)
	}
	return b, nil
}

// drain reads and closes a body so the connection can be reused.
func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
}

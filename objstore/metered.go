package objstore

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/vcon-server/vcon-server/internal/metrics"
)

// Metered is a Store that counts every call of the store it wraps, by
// call and outcome, and times it (metrics wrap the store as a
// decorator). The labels are the call's name and a fixed outcome word:
// never a key, which names a tenant and a version.
//
// Calls are "put" (an upload, counted when it ends), "get", "get_range",
// "stat", "delete", "delete_many" (one batch delete of any number of keys,
// an error when any key was not deleted) and "list". Outcomes are "ok", "not_found" (Get,
// GetRange, Stat: a normal answer when a purge proves an object gone),
// "exists" (a create-only put whose name was taken), "aborted" (an upload
// abandoned before its commit), "canceled" (the caller's context ended) and
// "error". A get is counted when its body is closed, so a body that fails
// half way counts as an error; its time is the time to the first byte.
type Metered struct {
	inner    Store
	requests *metrics.Counter
	seconds  *metrics.Histogram
}

// Calls lists the call label values of Metered.
var Calls = []string{"put", "get", "get_range", "stat", "delete", "delete_many", "list"}

// NewMetered wraps s, registering its two families in reg:
// vcon_objstore_requests_total{call,outcome} and
// vcon_objstore_request_duration_seconds{call}.
func NewMetered(s Store, reg *metrics.Registry) *Metered {
	m := &Metered{
		inner:    s,
		requests: reg.NewCounter("vcon_objstore_requests_total", "Object store calls by call and outcome.", "call", "outcome"),
		seconds:  reg.NewHistogram("vcon_objstore_request_duration_seconds", "Object store call latency by call (a get: to its first byte).", metrics.LatencyBuckets, "call"),
	}
	// Every call's success and error series exist from the start, so an
	// alert on the error rate has a series to read before the first error.
	for _, c := range Calls {
		m.requests.Declare(c, "ok")
		m.requests.Declare(c, "error")
	}
	return m
}

// Unwrap returns the store Metered wraps, for code that needs a back
// end's own methods.
func (m *Metered) Unwrap() Store { return m.inner }

// String names the wrapped store.
func (m *Metered) String() string { return m.inner.String() }

// RemoveStaleTemps passes the data directory's clean-up of killed writes'
// temporary files through (archive.Look looks for it); other back ends have nothing to remove.
func (m *Metered) RemoveStaleTemps(olderThan time.Duration) (int, error) {
	if d, ok := m.inner.(interface {
		RemoveStaleTemps(time.Duration) (int, error)
	}); ok {
		return d.RemoveStaleTemps(olderThan)
	}
	return 0, nil
}

func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrNotFound):
		return "not_found"
	case errors.Is(err, ErrExists):
		return "exists"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	default:
		return "error"
	}
}

func (m *Metered) count(call string, start time.Time, err error) {
	m.requests.Inc(call, outcome(err))
	m.seconds.Observe(time.Since(start).Seconds(), call)
}

// Upload counts one put when the upload ends: by its commit, or as
// aborted, or as an error when a write or the start failed.
func (m *Metered) Upload(ctx context.Context, key string, createOnly bool) (Upload, error) {
	start := time.Now()
	u, err := m.inner.Upload(ctx, key, createOnly)
	if err != nil {
		m.count("put", start, err)
		return nil, err
	}
	return &meteredUpload{Upload: u, m: m, start: start}, nil
}

type meteredUpload struct {
	Upload
	m        *Metered
	start    time.Time
	writeErr error
	ended    bool
}

func (u *meteredUpload) Write(p []byte) (int, error) {
	n, err := u.Upload.Write(p)
	if err != nil && u.writeErr == nil {
		u.writeErr = err
	}
	return n, err
}

func (u *meteredUpload) Commit() error {
	err := u.Upload.Commit()
	if !u.ended {
		u.ended = true
		u.m.count("put", u.start, err)
	}
	return err
}

func (u *meteredUpload) Abort() {
	u.Upload.Abort()
	if !u.ended {
		u.ended = true
		if u.writeErr != nil {
			u.m.count("put", u.start, u.writeErr)
		} else {
			u.m.requests.Inc("put", "aborted")
		}
	}
}

// Get counts one get, when its body is closed.
func (m *Metered) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return m.body("get", func() (io.ReadCloser, error) { return m.inner.Get(ctx, key) })
}

// GetRange counts one get_range, when its body is closed.
func (m *Metered) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	return m.body("get_range", func() (io.ReadCloser, error) { return m.inner.GetRange(ctx, key, off, n) })
}

func (m *Metered) body(call string, open func() (io.ReadCloser, error)) (io.ReadCloser, error) {
	start := time.Now()
	rc, err := open()
	m.seconds.Observe(time.Since(start).Seconds(), call)
	if err != nil {
		m.requests.Inc(call, outcome(err))
		return nil, err
	}
	return &meteredBody{ReadCloser: rc, m: m, call: call}, nil
}

type meteredBody struct {
	io.ReadCloser
	m      *Metered
	call   string
	err    error
	closed bool
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

func (b *meteredBody) Close() error {
	err := b.ReadCloser.Close()
	if !b.closed {
		b.closed = true
		b.m.requests.Inc(b.call, outcome(b.err))
	}
	return err
}

// Stat counts one stat.
func (m *Metered) Stat(ctx context.Context, key string) (Info, error) {
	start := time.Now()
	info, err := m.inner.Stat(ctx, key)
	m.count("stat", start, err)
	return info, err
}

// Delete counts one delete.
func (m *Metered) Delete(ctx context.Context, key string) error {
	start := time.Now()
	err := m.inner.Delete(ctx, key)
	m.count("delete", start, err)
	return err
}

// DeleteMany counts one delete_many when the wrapped store deletes in
// batches; over a store that does not, each key is one counted delete.
func (m *Metered) DeleteMany(ctx context.Context, keys []string) ([]string, error) {
	md, ok := m.inner.(ManyDeleter)
	if !ok {
		return deleteEach(ctx, m, keys)
	}
	start := time.Now()
	failed, err := md.DeleteMany(ctx, keys)
	m.count("delete_many", start, err)
	return failed, err
}

// List counts one list however many pages the back end read. An error
// that fn returned stops the listing but is not the store's: it counts
// as ok.
func (m *Metered) List(ctx context.Context, prefix string, fn func(Info) error) error {
	start := time.Now()
	var fnErr error
	err := m.inner.List(ctx, prefix, func(info Info) error {
		if err := fn(info); err != nil {
			fnErr = err
			return err
		}
		return nil
	})
	counted := err
	if fnErr != nil && errors.Is(err, fnErr) {
		counted = nil
	}
	m.count("list", start, counted)
	return err
}

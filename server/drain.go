package server

import (
	"io"
	"net/http"
	"time"
)

// A refused store and the rest of its body. Many clients write a whole
// request before they read the answer (Python's requests and http.client,
// most scripts). When the server refuses a store part way through the body
// (413 past max_vcon_size, 400 for a body that is not JSON, 415) and closes
// the connection with the rest unread, the kernel answers the client's
// next bytes with a reset, which also throws away the refusal waiting in
// the client's receive buffer: the client sees a broken connection (a TLS
// error) instead of the answer. net/http reads at most 256 KiB of an
// unread body before it closes; a body past max_vcon_size is larger.
//
// So a store refused with its body unread answers first, with
// "Connection: close", and then reads the rest of the body and drops it,
// within two bounds (Limits.RefusedBodyBytes, 32 × max_vcon_size unless
// set, and Limits.RefusedBodyTime, 30 seconds unless set), before the
// connection closes. A body announced longer than the byte bound is not
// read at all. A client that stops sending when it reads the refusal
// closes the connection, which ends the reading at once. A client that
// asked for "Expect: 100-continue" and was never told to go on sends no
// body, so none is read. What the bounds protect: the bytes read are
// dropped as they come, through a fixed buffer, never parsed or kept; a
// connection is held at most RefusedBodyTime; and only a key with the
// write scope gets this far (the refusals before authentication read
// nothing more). docs/troubleshooting.md says it for operators.

const (
	defaultRefusedBodyFactor = 32
	defaultRefusedBodyTime   = 30 * time.Second
)

// countingBody is a store's request body, counting what the handler read.
type countingBody struct {
	io.ReadCloser
	n   int64
	err error // io.EOF at the end; another error when reading it failed
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if err != nil && b.err == nil {
		b.err = err
	}
	return n, err
}

// refusalWriter decides, when a refusal's status is written, whether the
// rest of the body is read after it.
type refusalWriter struct {
	http.ResponseWriter
	r     *http.Request
	body  *countingBody
	limit int64     // bytes read after the refusal, at most
	until time.Time // when reading them stops, at the latest
	wrote bool
	drain bool
}

func (w *refusalWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *refusalWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *refusalWriter) WriteHeader(status int) {
	if !w.wrote {
		w.wrote = true
		if status >= 400 {
			w.decide()
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

// decide sets the answer's headers for what is left of the body.
func (w *refusalWriter) decide() {
	b, length := w.body, w.r.ContentLength
	switch {
	case b.err == io.EOF, length == 0, length > 0 && b.n >= length:
		return // all read: the connection may serve another request
	case b.err != nil:
		// Reading failed (the read timeout, a broken connection or
		// chunking): what follows cannot be read either.
		w.Header().Set("Connection", "close")
		return
	case b.n == 0 && w.r.Header.Get("Expect") != "":
		// Go's server answers "100-continue" only when the body is first
		// read: this client was never told to send its body.
		w.Header().Set("Connection", "close")
		return
	case length > 0 && length-b.n > w.limit:
		w.Header().Set("Connection", "close")
		return
	}
	w.Header().Set("Connection", "close")
	// Reading the body after the answer's headers is what the handler
	// does next; net/http allows it once told.
	if http.NewResponseController(w.ResponseWriter).EnableFullDuplex() == nil {
		w.drain = true
	}
}

// finish reads the rest of a refused body once the refusal is sent.
func (w *refusalWriter) finish() {
	if !w.drain {
		return
	}
	rc := http.NewResponseController(w.ResponseWriter)
	if rc.Flush() != nil {
		return
	}
	rc.SetReadDeadline(w.until)
	io.CopyN(io.Discard, w.body.ReadCloser, w.limit)
}

// refusedBodies wraps a store's writer and body so that a refusal reads
// the rest of the body within bounds (see above); call finish when the
// handler is done.
func (s *Server) refusedBodies(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, func()) {
	start := time.Now()
	limit := s.Limits.RefusedBodyBytes
	if limit <= 0 {
		limit = defaultRefusedBodyFactor * max(s.MaxSize, 1)
	}
	wait := s.Limits.RefusedBodyTime
	if wait <= 0 {
		wait = defaultRefusedBodyTime
	}
	body := &countingBody{ReadCloser: r.Body}
	r.Body = body
	rw := &refusalWriter{ResponseWriter: w, r: r, body: body, limit: limit}
	return rw, func() {
		// Within the request's own read timeout too, when one is set: a
		// refusal never gives a client more time than its request had.
		rw.until = time.Now().Add(wait)
		if rt := s.Limits.ReadTimeout; rt > 0 && start.Add(rt).Before(rw.until) {
			rw.until = start.Add(rt)
		}
		rw.finish()
	}
}

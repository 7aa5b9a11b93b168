package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
)

// Limits guard the public listener against hostile clients. The zero value
// keeps every default: the timeouts of NewHTTPServer and an authentication
// limit of 20 failures a minute per address. Tests shorten them.
type Limits struct {
	// Timeouts and header size of the http.Server (see NewHTTPServer for
	// the defaults). A slowloris client that trickles its headers is cut
	// off after ReadHeaderTimeout; one that trickles its body after
	// ReadTimeout; one that never reads its answer after WriteTimeout.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int

	// AuthFailures failed authentications (answers 401 to a request that
	// sent an Authorization header) from one address within AuthWindow
	// make the server refuse that address's requests that carry no valid
	// key with 429 for AuthBlock. Defaults: 20, 1 minute, 5 minutes. A
	// request without the header guesses no key: it is answered 401 and
	// not counted, so that a client that never authenticates (a health
	// probe, the server's own webhook sent to itself) does not get its
	// address, and everyone behind it, refused.
	AuthFailures int
	AuthWindow   time.Duration
	AuthBlock    time.Duration

	// RefusedBodyBytes and RefusedBodyTime bound the reading of the rest
	// of a store's body after a refusal, so that a client that writes its
	// whole body before reading reads the refusal (server/drain.go).
	// Defaults: 32 × max_vcon_size and 30 seconds.
	RefusedBodyBytes int64
	RefusedBodyTime  time.Duration

	// ErasePerMinute is how many uuids one tenant's erasures may name a
	// minute (server/erasebudget.go). Default: 30,000, three erasures of
	// 10,000.
	ErasePerMinute int

	// Now is the limiters' clock (time.Now when nil).
	Now func() time.Time
}

// Apply sets on srv the timeouts and header size that l sets (non-zero).
func (l Limits) Apply(srv *http.Server) {
	if l.ReadHeaderTimeout > 0 {
		srv.ReadHeaderTimeout = l.ReadHeaderTimeout
	}
	if l.ReadTimeout > 0 {
		srv.ReadTimeout = l.ReadTimeout
	}
	if l.WriteTimeout > 0 {
		srv.WriteTimeout = l.WriteTimeout
	}
	if l.IdleTimeout > 0 {
		srv.IdleTimeout = l.IdleTimeout
	}
	if l.MaxHeaderBytes > 0 {
		srv.MaxHeaderBytes = l.MaxHeaderBytes
	}
}

// maxTracked bounds the limiter's memory: an attacker with many addresses
// cannot grow it without end.
const maxTracked = 10000

// authLimiter counts failed authentications per client address.
type authLimiter struct {
	max           int
	window, block time.Duration
	now           func() time.Time

	mu    sync.Mutex
	addrs map[string]*addrState
}

type addrState struct {
	start        time.Time // of the current counting window
	failures     int
	blockedUntil time.Time
}

func newAuthLimiter(l Limits) *authLimiter {
	a := &authLimiter{max: l.AuthFailures, window: l.AuthWindow, block: l.AuthBlock, now: l.Now, addrs: map[string]*addrState{}}
	if a.max <= 0 {
		a.max = 20
	}
	if a.window <= 0 {
		a.window = time.Minute
	}
	if a.block <= 0 {
		a.block = 5 * time.Minute
	}
	if a.now == nil {
		a.now = time.Now
	}
	return a
}

// blocked reports how long addr is still refused (0 when it is not).
func (a *authLimiter) blocked(addr string) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.addrs[addr]
	if st == nil {
		return 0
	}
	return max(st.blockedUntil.Sub(a.now()), 0)
}

// fail counts one failed authentication from addr and reports whether it
// started a block.
func (a *authLimiter) fail(addr string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	st := a.addrs[addr]
	if st == nil {
		if len(a.addrs) >= maxTracked {
			a.prune(now)
		}
		st = &addrState{start: now}
		a.addrs[addr] = st
	}
	if now.Sub(st.start) > a.window {
		st.start, st.failures = now, 0
	}
	st.failures++
	if st.failures >= a.max && !now.Before(st.blockedUntil) {
		st.blockedUntil = now.Add(a.block)
		st.start, st.failures = now, 0
		return true
	}
	return false
}

// prune forgets addresses neither blocked nor counting; if every slot is
// still taken, it forgets everything rather than grow: the limiter then
// fails open, which costs an attacker's victims nothing.
func (a *authLimiter) prune(now time.Time) {
	for k, st := range a.addrs {
		if now.After(st.blockedUntil) && now.Sub(st.start) > a.window {
			delete(a.addrs, k)
		}
	}
	if len(a.addrs) >= maxTracked {
		clear(a.addrs)
	}
}

// clientAddr is the address a limit applies to: the IP of an IPv4 client,
// the /64 of an IPv6 one (a single host commonly holds a whole /64).
func clientAddr(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// guard wraps the routes with the checks every request passes first:
// requests whose meaning is ambiguous are refused with 400 before any
// route sees them, and an address that keeps failing authentication is
// answered 429 for a while.
func (s *Server) guard(next http.Handler) http.Handler {
	lim := newAuthLimiter(s.Limits)
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status, msg := ambiguous(r); status != 0 {
			// The rest of a body we refused unread is not worth reading.
			w.Header().Set("Connection", "close")
			writeError(w, status, msg)
			return
		}
		addr := clientAddr(r.RemoteAddr)
		if wait := lim.blocked(addr); wait > 0 && !s.validKey(r) {
			// A valid key always passes: a recorder behind the same NAT as
			// a misconfigured client keeps working, and guessing a token
			// is hopeless anyway. What the block saves is the admin log
			// record each refusal would write, and it tells the
			// misconfigured client to stop.
			w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
			writeError(w, http.StatusTooManyRequests, "too many failed authentications from this address; wait before trying again with a valid key")
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.status == http.StatusUnauthorized && r.Header.Get("Authorization") != "" && lim.fail(addr) {
			log.Warn("authentication failures: refusing an address for a while", "address", addr,
				"failures", lim.max, "block_seconds", int(lim.block.Seconds()))
			if s.Cat != nil {
				s.Cat.NoteAdminLog(context.WithoutCancel(r.Context()), catalog.Record{Actor: "anonymous", Action: "authenticate_blocked", Status: http.StatusTooManyRequests})
			}
		}
	})
}

// validKey reports whether r carries a key the catalog knows.
func (s *Server) validKey(r *http.Request) bool {
	token, ok := bearer(r)
	if !ok || s.Cat == nil {
		return false
	}
	_, err := s.Cat.KeyByToken(r.Context(), strings.TrimSpace(token))
	// A catalog failure is not the client's: let the route answer it.
	return err == nil || !errors.Is(err, catalog.ErrNotFound)
}

// singleHeaders may appear once: with two, the route would read the first
// and a proxy or log might read the other.
var singleHeaders = []string{"Authorization", "Content-Type", "Content-Encoding", "If-None-Match"}

// ambiguous returns the status and reason r is refused with before
// routing, or 0.
func ambiguous(r *http.Request) (int, string) {
	for _, h := range singleHeaders {
		if len(r.Header.Values(h)) > 1 {
			return http.StatusBadRequest, "send the " + h + " header once"
		}
	}
	// The routes take uuids and ids: an escaped slash or backslash in a
	// path can only be an attempt to make one segment read as two. Such a
	// path names nothing here, like a missing resource.
	lower := strings.ToLower(r.URL.EscapedPath())
	if strings.Contains(lower, "%2f") || strings.Contains(lower, "%5c") || strings.Contains(lower, "%00") {
		return http.StatusNotFound, "no such resource: a path holds no encoded slash, backslash or NUL"
	}
	// The mux would redirect a path with dot or empty segments to its clean
	// form; a redirect would hide which resource the request meant, and
	// no client of this API sends one.
	if r.Method != http.MethodConnect && !cleanPath(r.URL.Path) {
		return http.StatusNotFound, "no such resource: a path has no empty, '.' or '..' segments"
	}
	return 0, ""
}

func cleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	segs := strings.Split(p[1:], "/")
	for i, s := range segs {
		if s == "." || s == ".." || (s == "" && i != len(segs)-1) {
			return false
		}
	}
	return true
}

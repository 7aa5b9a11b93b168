package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Rules are where deliveries may go (docs/webhooks.md, "Where events may
// go"): a public address, on a port from 1 to 65535, and whatever the
// configuration's [webhooks] allow lists besides. They are checked when a
// webhook is set, for an address written in its URL, and again at every
// connection, for whatever its name resolved to: DNS can change.
type Rules struct {
	Allow []netip.Prefix // addresses allowed whatever their class
}

// errNotAllowed is a connection the rules refused before it was made.
var errNotAllowed = errors.New("address not allowed")

// special are the address classes a webhook may not reach unless allowed:
// the host itself and its networks, and what is no one host.
var special = []struct {
	prefix netip.Prefix
	class  string
}{
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified address"},
	{netip.MustParsePrefix("::/128"), "an unspecified address"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared address (carrier-grade NAT)"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
	{netip.MustParsePrefix("fc00::/7"), "a unique-local address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a broadcast or reserved address"},
}

// nat64 is the well-known NAT64 prefix: its last 32 bits are an IPv4
// address, reached through the translator.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// refusal says why the rules refuse ip ("a private address"), or "".
// An IPv4 address is judged as itself however it is written: mapped
// (::ffff:a.b.c.d) or behind NAT64 (64:ff9b::a.b.c.d).
func (r Rules) refusal(ip netip.Addr) string {
	ip = ip.WithZone("")
	forms := []netip.Addr{ip}
	if v4 := ip.Unmap(); v4 != ip {
		forms = append(forms, v4)
	}
	if nat64.Contains(ip) {
		b := ip.As16()
		forms = append(forms, netip.AddrFrom4([4]byte(b[12:])))
	}
	for _, f := range forms {
		for _, a := range r.Allow {
			if a.Contains(f) {
				return ""
			}
		}
	}
	for _, f := range forms {
		for _, s := range special {
			if s.prefix.Contains(f) {
				return s.class
			}
		}
	}
	return ""
}

// allowedLoopback reports whether ip is a loopback address the rules
// allow: the one place plain http may go.
func (r Rules) allowedLoopback(ip netip.Addr) bool {
	return ip.Unmap().IsLoopback() && r.refusal(ip) == ""
}

// CheckURL accepts an https URL, and an http one to an allowed loopback
// address (a test, a sidecar on the same host): events leave the host
// encrypted. An address written in the URL must be one the rules allow;
// a name is checked when it is dialled.
func (r Rules) CheckURL(raw string) error {
	refuse := func(why, format string, args ...any) error {
		return &refusedURL{msg: fmt.Sprintf("the webhook URL %q ", raw) + fmt.Sprintf(format, args...), why: why}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil {
		return refuse("not an absolute URL", "is not an absolute http(s) URL without credentials")
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return refuse("not https", "must be https")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return refuse("a port outside 1 to 65535", "has port %s; a port is 1 to 65535", p)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return refuse("an empty port", "has an empty port; a port is 1 to 65535, or none")
	}
	host := u.Hostname()
	ip, isIP := parseIP(host)
	if u.Scheme == "http" {
		localhost := host == "localhost"
		switch {
		case isIP && r.allowedLoopback(ip):
			return nil
		case localhost && (r.allowedLoopback(netip.IPv6Loopback()) || r.allowedLoopback(netip.MustParseAddr("127.0.0.1"))):
			return nil // what it resolves to is checked at each connection
		case isIP && ip.Unmap().IsLoopback(), localhost:
			return refuse("http to a loopback address [webhooks] allow does not list", `is http to a loopback address that [webhooks] allow does not list; add it there (allow = ["127.0.0.1"]) or use https`)
		}
		return refuse("http to another host than an allowed loopback address", "is http to another host; use https (http is for an allowed loopback address only)")
	}
	if isIP {
		if why := r.refusal(ip); why != "" {
			return refuse(why, "names %s, which webhooks may not reach; list it in [webhooks] allow of the configuration to allow it", why)
		}
	}
	return nil
}

// refusedURL is a URL the rules refuse: msg for the operator who set it,
// why (the rule, without the URL) for the outbox.
type refusedURL struct{ msg, why string }

func (e *refusedURL) Error() string { return e.msg }

// parseIP reads an address as a URL's host writes it (brackets gone,
// maybe a zone).
func parseIP(host string) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(host)
	return ip, err == nil
}

// control is a net.Dialer's Control: it refuses, before the connection
// is made, an address the rules refuse; for plain http (loopbackOnly)
// anything but an allowed loopback address.
func (r Rules) control(loopbackOnly bool) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return errNotAllowed
		}
		ip := ap.Addr()
		if ap.Port() == 0 || r.refusal(ip) != "" || (loopbackOnly && !r.allowedLoopback(ip)) {
			return errNotAllowed
		}
		return nil
	}
}

// dialer connects only where the rules allow.
func (r Rules) dialer(loopbackOnly bool, timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: r.control(loopbackOnly)}
}

// reason words a failed attempt for the outbox and the log without the
// address, the port or the name it went to: what the attempt met, never
// where, so that the errors of webhooks set to probe a network map
// nothing.
func reason(err error) string {
	var (
		dns     *net.DNSError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
		record  tls.RecordHeaderError
		alert   tls.AlertError
		ne      net.Error
	)
	switch {
	case errors.Is(err, errNotAllowed):
		return "address not allowed (docs/webhooks.md, \"Where events may go\")"
	case strings.Contains(err.Error(), "response headers exceeded"), strings.Contains(err.Error(), "header list"):
		return "answer headers over 16 KiB"
	case errors.As(err, &dns):
		if dns.IsNotFound {
			return "the name does not resolve"
		}
		return "the name could not be resolved"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connect refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		// net/http's word for a connection the endpoint closed as the
		// request went out; it wraps no error to test for.
		strings.Contains(err.Error(), "server closed idle connection"):
		return "connection closed before an answer"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to the host"
	case errors.As(err, &unknown):
		return "tls: certificate signed by an unknown authority (--ca-file?)"
	case errors.As(err, &host):
		return "tls: the certificate is not valid for the URL's host"
	case errors.As(err, &invalid):
		return "tls: the certificate is not valid (expired, or not for a server)"
	case errors.As(err, &record):
		return "tls: the endpoint does not speak TLS"
	case errors.As(err, &alert):
		return alert.Error() + " (the endpoint's alert)"
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "no answer"
}

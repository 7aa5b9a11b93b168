package webhook

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// refusedAddrs are an address of every class the rules refuse, as a URL's
// host writes it, and the class.
var refusedAddrs = map[string]string{
	"127.0.0.1":                "loopback",
	"127.1.2.3":                "loopback",
	"[::1]":                    "loopback",
	"0.0.0.0":                  "unspecified",
	"0.1.2.3":                  "unspecified",
	"[::]":                     "unspecified",
	"10.0.0.1":                 "private",
	"172.16.0.1":               "private",
	"172.31.255.255":           "private",
	"192.168.1.1":              "private",
	"100.64.0.1":               "shared",
	"100.127.255.254":          "shared",
	"169.254.169.254":          "link-local",
	"[fe80::1]":                "link-local",
	"[febf::1]":                "link-local",
	"[fc00::1]":                "unique-local",
	"[fd00::1]":                "unique-local",
	"224.0.0.1":                "multicast",
	"239.255.255.250":          "multicast",
	"[ff02::1]":                "multicast",
	"255.255.255.255":          "broadcast",
	"[::ffff:127.0.0.1]":       "loopback",
	"[::ffff:10.0.0.1]":        "private",
	"[::ffff:169.254.169.254]": "link-local",
	"[::ffff:0.0.0.0]":         "unspecified",
	"[64:ff9b::a9fe:a9fe]":     "link-local", // 169.254.169.254 through NAT64
	"[64:ff9b::7f00:1]":        "loopback",
	"[64:ff9b::10.1.2.3]":      "private",
	"[64:ff9b::ffff:ffff]":     "broadcast",
	"[::ffff:c0a8:101]":        "private", // 192.168.1.1, mapped, in hex
	"[fe80::1%25eth0]":         "link-local",
}

// TestCheckURLRefuses: every class, in every form, refused at set time
// for https as for http, and each accepted once allowed; a port outside
// 1 to 65535 refused; public addresses and names accepted.
func TestCheckURLRefuses(t *testing.T) {
	var none Rules
	for host, class := range refusedAddrs {
		for _, scheme := range []string{"https", "http"} {
			u := scheme + "://" + host + ":8443/h"
			err := none.CheckURL(u)
			if err == nil {
				t.Errorf("%s: accepted", u)
				continue
			}
			if scheme == "https" && !strings.Contains(err.Error(), class) {
				t.Errorf("%s: %v, want it to name %s", u, err, class)
			}
		}
		ip, err := netip.ParseAddr(strings.NewReplacer("[", "", "]", "", "%25", "%").Replace(host))
		if err != nil {
			t.Fatal(err)
		}
		allowed := Rules{Allow: []netip.Prefix{netip.PrefixFrom(ip.Unmap().WithZone(""), ip.Unmap().BitLen())}}
		if strings.HasPrefix(host, "[64:ff9b::") {
			allowed.Allow = []netip.Prefix{nat64}
		}
		if err := allowed.CheckURL("https://" + host + "/h"); err != nil {
			t.Errorf("%s, allowed: %v", host, err)
		}
	}
	for u, want := range map[string]string{
		"https://hooks.example.com:0/h":     "has port 0",
		"https://hooks.example.com:99999/h": "has port 99999",
		"https://hooks.example.com:65536/h": "has port 65536",
		"https://hooks.example.com:/h":      "an empty port",
		"https://[::1]:0/h":                 "has port 0",
		"ftp://hooks.example.com/h":         "must be https",
		"https://user:pw@example.com/h":     "without credentials",
		"/relative":                         "not an absolute",
		"http://hooks.example.com/h":        "use https",
		"http://93.184.216.34/h":            "use https",
		"http://localhost:9/h":              "[webhooks] allow does not list",
	} {
		if err := none.CheckURL(u); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", u, err, want)
		}
	}
	for _, u := range []string{
		"https://hooks.example.com/vcon", "https://hooks.example.com:65535/vcon", "https://hooks.example.com:1/vcon",
		"https://93.184.216.34/h", "https://172.15.255.255/h", "https://172.32.0.1/h", "https://100.63.255.255/h",
		"https://100.128.0.1/h", "https://[2606:2800:220:1::1]/h", "https://[::ffff:93.184.216.34]/h",
		"https://name.that.does.not.resolve.invalid/h",
	} {
		if err := none.CheckURL(u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	// Plain http: to an allowed loopback address only.
	lo := Rules{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8")}}
	for u, ok := range map[string]bool{
		"http://127.0.0.1:8990/h": true, "http://localhost:8990/h": true, "http://127.0.0.2/h": false,
		"http://[::1]/h": false, "http://10.0.0.1/h": false, "https://10.0.0.1/h": true, "https://127.0.0.1/h": true,
	} {
		if err := lo.CheckURL(u); (err == nil) != ok {
			t.Errorf("allow 127.0.0.1, 10.0.0.0/8: %s: %v", u, err)
		}
	}
}

// TestControlRefuses: the dial's check refuses every class before the
// connection is made (Control runs before connect; nothing is dialled
// here), a port 0, and for plain http anything but an allowed loopback.
func TestControlRefuses(t *testing.T) {
	var none Rules
	for host := range refusedAddrs {
		ip := strings.NewReplacer("[", "", "]", "", "%25eth0", "").Replace(host)
		addr := net.JoinHostPort(ip, "443")
		if err := none.control(false)("tcp", addr, nil); !errors.Is(err, errNotAllowed) {
			t.Errorf("%s: %v", addr, err)
		}
	}
	if err := none.control(false)("tcp", "93.184.216.34:443", nil); err != nil {
		t.Errorf("a public address: %v", err)
	}
	if err := none.control(false)("tcp", "93.184.216.34:0", nil); !errors.Is(err, errNotAllowed) {
		t.Errorf("port 0: %v", err)
	}
	if err := none.control(true)("tcp", "93.184.216.34:80", nil); !errors.Is(err, errNotAllowed) {
		t.Errorf("plain http to a public address: %v", err)
	}
	lo := Rules{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	if err := lo.control(true)("tcp", "127.0.0.1:8990", nil); err != nil {
		t.Errorf("plain http to an allowed loopback: %v", err)
	}
}

// counting is a loopback listener that counts the connections it takes.
func counting(t *testing.T, h http.Handler, tls bool) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			n.Add(1)
		}
	}
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestDialRefusesWhatANameResolvesTo: a name accepted when set
// (localhost) that resolves to a loopback address is refused at the dial,
// before any connection, unless allowed; the error names neither address
// nor port.
func TestDialRefusesWhatANameResolvesTo(t *testing.T) {
	for _, tls := range []bool{true, false} {
		srv, conns := counting(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }), tls)
		port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
		scheme := map[bool]string{true: "https", false: "http"}[tls]
		url := scheme + "://localhost:" + port + "/h"
		s := newSender(5*time.Second, Rules{})
		c, err := s.client(clientKey{plain: !tls})
		if err != nil {
			t.Fatal(err)
		}
		err = s.post(context.Background(), &endpoint{url: url, key: make([]byte, 32), client: c}, "msg_1", []byte("{}"))
		if !errors.Is(err, errNotAllowed) || strings.Contains(err.Error(), port) || strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), "::1") {
			t.Errorf("%s: %v, want address not allowed without the address", url, err)
		}
		if n := conns.Load(); n != 0 {
			t.Errorf("%s: %d connections made", url, n)
		}
		// Allowed, it is reached.
		s = newSender(5*time.Second, Rules{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}})
		if c, err = s.client(clientKey{plain: !tls}); err != nil {
			t.Fatal(err)
		}
		if tls {
			c.Transport.(*http.Transport).TLSClientConfig.RootCAs = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
			url = srv.URL + "/h" // the test certificate names 127.0.0.1, not localhost
		}
		if err := s.post(context.Background(), &endpoint{url: url, key: make([]byte, 32), client: c}, "msg_1", []byte("{}")); err != nil || conns.Load() != 1 {
			t.Errorf("%s, allowed: %v after %d connections", url, err, conns.Load())
		}
	}
}

// TestNoProxy: a proxy named by the environment is never used: the
// delivery goes to its endpoint, or nowhere.
func TestNoProxy(t *testing.T) {
	proxy, proxied := counting(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }), false)
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("HTTPS_PROXY", proxy.URL)
	t.Setenv("NO_PROXY", "")
	srv, conns := counting(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }), false)
	s := newSender(5*time.Second, Rules{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	c, err := s.client(clientKey{plain: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.post(context.Background(), &endpoint{url: srv.URL, key: make([]byte, 32), client: c}, "msg_1", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if proxied.Load() != 0 || conns.Load() != 1 {
		t.Errorf("%d connections to the proxy, %d to the endpoint", proxied.Load(), conns.Load())
	}
}

// TestErrorsNameNoAddress: what an attempt met, in the outbox's words:
// refused, timeout, TLS, headers too large; never the address or port.
func TestErrorsNameNoAddress(t *testing.T) {
	lo := Rules{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	s := newSender(1500*time.Millisecond, lo) // room for a TLS handshake under -race on a loaded machine
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	hang, err := net.Listen("tcp", "127.0.0.1:0") // takes connections, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Close()
	shut, err := net.Listen("tcp", "127.0.0.1:0") // takes connections and closes them
	if err != nil {
		t.Fatal(err)
	}
	defer shut.Close()
	go func() {
		for {
			c, err := shut.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	tlsSrv, _ := counting(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }), true)
	big, _ := counting(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Padding", strings.Repeat("a", maxHeaderBytes+1024))
		w.WriteHeader(204)
	}), false)
	for url, want := range map[string]string{
		"http://" + closed + "/h":         "no answer: connect refused",
		"http://" + hang.Addr().String():  "no answer: timeout",
		"https://" + hang.Addr().String(): "no answer: timeout",
		tlsSrv.URL:                        "no answer: tls: certificate signed by an unknown authority (--ca-file?)",
		big.URL:                           "no answer: answer headers over 16 KiB",
		"http://" + shut.Addr().String():  "no answer: connection closed before an answer",
	} {
		c, err := s.client(clientKey{plain: strings.HasPrefix(url, "http:")})
		if err != nil {
			t.Fatal(err)
		}
		err = s.post(context.Background(), &endpoint{url: url, key: make([]byte, 32), client: c}, "msg_1", []byte("{}"))
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", url, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), url[strings.LastIndex(url, ":")+1:])) {
			t.Errorf("%s: the error names the address: %v", url, err)
		}
	}
}

func newSender(timeout time.Duration, r Rules) *Sender {
	return &Sender{Policy: Policy{Timeout: timeout}, Rules: r, Now: time.Now}
}

package reliability

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/server"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// hostileLimits are short enough for a test to wait them out.
var hostileLimits = server.Limits{
	ReadHeaderTimeout: time.Second,
	ReadTimeout:       3 * time.Second,
	WriteTimeout:      3 * time.Second,
}

// wellBehaved stores and reads vCons in a loop until stopped: the client
// whose requests every hostile one must leave alone.
type wellBehaved struct {
	stop     chan struct{}
	done     sync.WaitGroup
	ok, bad  atomic.Int64
	mu       sync.Mutex
	firstBad string
}

func startWellBehaved(t *testing.T, e *testenv.Env, token string) *wellBehaved {
	w := &wellBehaved{stop: make(chan struct{})}
	client := e.HTTPClient()
	do := func(method, path string, body []byte) (int, []byte, error) {
		req, _ := http.NewRequest(method, e.BaseURL+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/vcon")
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			u := ids.NewRandom().String()
			body := apitest.NewVcon(u, "well behaved", "+15555550100")
			s1, _, err1 := do("POST", "/vcons", body)
			s2, got, err2 := do("GET", "/vcons/"+u, nil)
			if err1 != nil || err2 != nil || s1 != 201 || s2 != 200 || !bytes.Equal(got, body) {
				w.bad.Add(1)
				w.mu.Lock()
				if w.firstBad == "" {
					w.firstBad = fmt.Sprintf("POST %d %v, GET %d %v", s1, err1, s2, err2)
				}
				w.mu.Unlock()
			} else {
				w.ok.Add(1)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return w
}

func (w *wellBehaved) check(t *testing.T) {
	close(w.stop)
	w.done.Wait()
	if w.bad.Load() != 0 || w.ok.Load() < 5 {
		t.Errorf("the well-behaved client: %d good rounds, %d bad (first: %s)", w.ok.Load(), w.bad.Load(), w.firstBad)
	}
	t.Logf("the well-behaved client made %d good rounds beside the hostile ones", w.ok.Load())
}

// tlsConfig trusts the server's certificate.
func tlsConfig(e *testenv.Env) *tls.Config {
	return e.HTTPClient().Transport.(*http.Transport).TLSClientConfig.Clone()
}

// raw sends request bytes as they are over TLS and reads one answer:
// its status, or 0 and the error when the connection was closed instead.
func raw(t *testing.T, e *testenv.Env, request string) (int, string, error) {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", strings.TrimPrefix(e.BaseURL, "https://"), tlsConfig(e))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func is4xx(status int) bool { return status >= 400 && status < 500 }

// TestHostileClients sends what a hostile or broken client would, one
// kind at a time, while a well-behaved client stores and reads: each gets
// a clear 4xx or a closed connection, and the well-behaved client never
// notices.
func TestHostileClients(t *testing.T) {
	e := testenv.New(t, testenv.Options{MaxVconSize: "8MiB", Limits: hostileLimits})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read", "delete")
	op := e.OperatorKey()
	good := startWellBehaved(t, e, k.Token)
	host := "Host: localhost\r\n"
	auth := "Authorization: Bearer " + k.Token + "\r\n"

	t.Run("OversizedHeaders", func(t *testing.T) {
		status, _, err := raw(t, e, "GET /vcons HTTP/1.1\r\n"+host+auth+"X-Big: "+strings.Repeat("a", 100<<10)+"\r\n\r\n")
		if !(status == 431 || err != nil) {
			t.Fatalf("100 KiB of headers: %d %v, want 431 or a closed connection", status, err)
		}
		status, _, err = raw(t, e, "GET /"+strings.Repeat("v", 100<<10)+" HTTP/1.1\r\n"+host+"\r\n")
		if !(is4xx(status) || err != nil) {
			t.Fatalf("a 100 KiB path: %d %v", status, err)
		}
	})

	t.Run("OversizedBodies", func(t *testing.T) {
		u := ids.NewRandom().String()
		big := append([]byte(`{"uuid":"`+u+`","x":"`), bytes.Repeat([]byte("a"), 9<<20)...)
		big = append(big, `"}`...)
		r := e.Do("POST", "/vcons", k.Token, big, "Content-Type", "application/vcon")
		if r.Status != 413 {
			t.Fatalf("9 MiB with max_vcon_size 8MiB: %d", r.Status)
		}
		// Chunked, no length announced: refused when the limit is crossed.
		req, _ := http.NewRequest("POST", e.BaseURL+"/vcons", io.MultiReader(bytes.NewReader(big)))
		req.Header.Set("Authorization", "Bearer "+k.Token)
		req.Header.Set("Content-Type", "application/vcon")
		resp, err := e.HTTPClient().Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 413 {
				t.Fatalf("chunked 9 MiB: %d", resp.StatusCode)
			}
		}
		// An admin body over its 64 KiB.
		r = e.Do("POST", "/admin/tenants", op.Token, []byte(`{"name":"`+strings.Repeat("a", 100<<10)+`"}`), "Content-Type", "application/json")
		if !is4xx(r.Status) {
			t.Fatalf("a 100 KiB admin body: %d", r.Status)
		}
		if got := e.Do("GET", "/vcons/"+u, k.Token, nil); got.Status != 404 {
			t.Fatalf("a refused body was stored: %d", got.Status)
		}
	})

	t.Run("Slowloris", func(t *testing.T) {
		// Headers one byte at a time, slower than ReadHeaderTimeout (1s)
		// allows: the server must cut the connection.
		conn, err := tls.Dial("tcp", strings.TrimPrefix(e.BaseURL, "https://"), tlsConfig(e))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		msg := "GET /vcons HTTP/1.1\r\n" + host + auth + "X-Slow: " + strings.Repeat("s", 100)
		var werr error
		for i := 0; i < len(msg) && werr == nil && time.Since(start) < 10*time.Second; i++ {
			_, werr = conn.Write([]byte{msg[i]})
			time.Sleep(100 * time.Millisecond)
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, rerr := conn.Read(make([]byte, 1024))
		took := time.Since(start)
		var ne net.Error
		if errors.As(rerr, &ne) && ne.Timeout() {
			t.Fatalf("the server still holds a slowloris connection after %v", took)
		}
		if took > 8*time.Second {
			t.Fatalf("cut off after %v, want about the 1s ReadHeaderTimeout", took)
		}
		t.Logf("slowloris cut off after %v (%d bytes of answer, %v)", took.Round(100*time.Millisecond), n, rerr)
	})

	t.Run("SlowBody", func(t *testing.T) {
		// The body trickles: ReadTimeout (3s) ends the request; the client
		// gets a 4xx or a closed connection, never a 5xx.
		conn, err := tls.Dial("tcp", strings.TrimPrefix(e.BaseURL, "https://"), tlsConfig(e))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		u := ids.NewRandom().String()
		body := apitest.NewVcon(u, "slow", "+15555550100")
		fmt.Fprintf(conn, "POST /vcons HTTP/1.1\r\n%s%sContent-Type: application/vcon\r\nContent-Length: %d\r\n\r\n", host, auth, len(body))
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < len(body); i++ {
				if _, err := conn.Write(body[i : i+1]); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
		conn.SetReadDeadline(time.Now().Add(15 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err == nil {
			resp.Body.Close()
			if !is4xx(resp.StatusCode) {
				t.Fatalf("a body slower than ReadTimeout: %d, want a 4xx or a closed connection", resp.StatusCode)
			}
		}
		conn.Close()
		<-done
		if got := e.Do("GET", "/vcons/"+u, k.Token, nil); got.Status != 404 {
			t.Fatalf("the trickled vCon was stored: %d", got.Status)
		}
	})

	t.Run("ReaderThatNeverReads", func(t *testing.T) {
		// A 7 MiB vCon asked for by a client with a tiny receive window
		// that never reads: WriteTimeout (3s) frees the server.
		u := ids.NewRandom().String()
		big := append([]byte(`{"uuid":"`+u+`","x":"`), bytes.Repeat([]byte("b"), 7<<20)...)
		big = append(big, `"}`...)
		if r := e.Do("POST", "/vcons", k.Token, big, "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("POST 7 MiB: %d", r.Status)
		}
		d := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
			return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		}}
		conn, err := tls.DialWithDialer(d, "tcp", strings.TrimPrefix(e.BaseURL, "https://"), tlsConfig(e))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET /vcons/%s HTTP/1.1\r\n%s%s\r\n", u, host, auth)
		time.Sleep(5 * time.Second)
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		n, _ := io.Copy(io.Discard, conn)
		if n >= int64(len(big)) {
			t.Fatalf("read %d bytes: the server waited for the slow reader past WriteTimeout", n)
		}
		t.Logf("a reader that never read got %d of %d bytes before the cut", n, len(big))
	})

	t.Run("PathTricks", func(t *testing.T) {
		u := ids.NewRandom().String()
		if r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(u, "x", "+15555550100"), "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatal(r.Status)
		}
		for _, p := range []string{
			"/vcons/../admin/tenants", "/vcons/%2e%2e/admin/tenants", "/vcons/" + u + "/..", "/vcons/./" + u,
			"//vcons/" + u, "/vcons//" + u, "/vcons/" + u[:8] + "%2F" + u[9:], "/vcons/" + u + "%2Fversions",
			"/vcons/" + u + "%00", "/vcons/%2e%2e%2fadmin", "/admin/tenants/..%2F..%2Fvcons",
			"/vcons/not-a-uuid", "/vcons/" + strings.ToUpper(u) + "x", "/vcons/" + strings.ReplaceAll(u, "-", ""),
			"/vcons/{" + u + "}", "/vcons/" + u + "/versions/..", "/vcons/%75%75", "/vcons/" + u[:35],
			"/vcons/ffffffff-ffff-ffff-ffff-fffffffffffff", "/vcons/zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz",
			"/vcons/ffffffff-ffff-ffff-ffff--fffffffffff", "/vcons/ffffffff-ffff-ffff-ffff-ffffffffff-f",
		} {
			status, body, err := raw(t, e, "GET "+p+" HTTP/1.1\r\n"+host+auth+"\r\n")
			if err != nil || !is4xx(status) {
				t.Errorf("GET %s: %d %v %s, want a 4xx", p, status, err, body)
			}
		}
		// The absolute form names the path too.
		if status, _, _ := raw(t, e, "GET https://elsewhere.example/vcons/"+u+" HTTP/1.1\r\n"+host+auth+"\r\n"); status != 200 {
			t.Errorf("absolute-form request: %d", status)
		}
	})

	t.Run("RepeatedWrongTokens", func(t *testing.T) {
		// From another loopback address, so the limit is not the good
		// client's: 127.0.0.2 is loopback on Linux.
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
		tr := &http.Transport{TLSClientConfig: tlsConfig(e), DialContext: d.DialContext}
		bad := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		send := func(token string) int {
			req, _ := http.NewRequest("GET", e.BaseURL+"/vcons", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := bad.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode
		}
		adminBefore := strings.Count(e.CLI("audit", "export", "--admin"), `"authenticate"`)
		var codes []int
		for i := 0; i < 30; i++ {
			codes = append(codes, send(fmt.Sprintf("vcs_%016d_wrong", i)))
		}
		for i, c := range codes {
			want := 401
			if i >= 20 {
				want = 429
			}
			if c != want {
				t.Fatalf("wrong token %d answered %d, want %d (all: %v)", i+1, c, want, codes)
			}
		}
		// A valid key from the blocked address still passes.
		if c := send(k.Token); c != 200 {
			t.Fatalf("a valid key from the blocked address: %d", c)
		}
		// The good client's address was never blocked.
		if r := e.Do("GET", "/vcons", "vcs_0000000000000000_wrong", nil); r.Status != 401 {
			t.Fatalf("a wrong token from the good client's address: %d, want 401", r.Status)
		}
		admin := e.CLI("audit", "export", "--admin")
		if n := strings.Count(admin, `"authenticate"`) - adminBefore; n != 21 {
			t.Errorf("%d authenticate records, want 21: the 429s write none", n)
		}
		if n := strings.Count(admin, `"authenticate_blocked"`); n != 1 {
			t.Errorf("%d authenticate_blocked records, want 1", n)
		}
	})

	t.Run("DuplicateAndMixedCaseHeaders", func(t *testing.T) {
		for _, tc := range []struct {
			name, headers string
			ok            func(int) bool
		}{
			{"two Authorization, valid first", auth + "Authorization: Bearer vcs_0000000000000000_wrong\r\n", func(s int) bool { return s == 400 || s == 401 }},
			{"two Authorization, valid second", "Authorization: Bearer vcs_0000000000000000_wrong\r\n" + auth, func(s int) bool { return s == 400 || s == 401 }},
			{"two Authorization, same value", auth + auth, func(s int) bool { return s == 400 || s == 401 }},
			{"mixed-case header name", "aUtHoRiZaTiOn: Bearer " + k.Token + "\r\n", func(s int) bool { return s == 200 }},
			{"lower-case header name", "authorization: Bearer " + k.Token + "\r\n", func(s int) bool { return s == 200 }},
			{"lower-case scheme", "Authorization: bearer " + k.Token + "\r\n", func(s int) bool { return s == 200 || s == 401 }},
			{"no space after scheme", "Authorization: Bearer" + k.Token + "\r\n", func(s int) bool { return s == 401 }},
		} {
			status, body, err := raw(t, e, "GET /vcons HTTP/1.1\r\n"+host+tc.headers+"\r\n")
			if err != nil || !tc.ok(status) {
				t.Errorf("%s: %d %v %s", tc.name, status, err, body)
			}
		}
		u := ids.NewRandom().String()
		body := apitest.NewVcon(u, "dup", "+15555550100")
		for _, h := range []string{
			"Content-Type: application/vcon\r\nContent-Type: text/plain\r\n",
			"Content-Type: application/vcon\r\nContent-Encoding: gzip\r\nContent-Encoding: identity\r\n",
			"Content-Type: application/vcon\r\nContent-Length: 5\r\n",
		} {
			req := fmt.Sprintf("POST /vcons HTTP/1.1\r\n%s%s%sContent-Length: %d\r\n\r\n%s", host, auth, h, len(body), body)
			status, answer, err := raw(t, e, req)
			if !(is4xx(status) || err != nil) {
				t.Errorf("POST with %q: %d %s", h, status, answer)
			}
		}
		if got := e.Do("GET", "/vcons/"+u, k.Token, nil); got.Status != 404 {
			t.Errorf("a vCon with ambiguous headers was stored: %d", got.Status)
		}
	})

	t.Run("DeepJSON", func(t *testing.T) {
		deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
		for _, body := range []string{
			deep,
			`{"uuid":"` + ids.NewRandom().String() + `","x":` + deep + `}`,
			strings.Repeat(`{"a":`, 100000) + "1" + strings.Repeat("}", 100000),
		} {
			if r := e.Do("POST", "/vcons", k.Token, []byte(body), "Content-Type", "application/vcon"); r.Status != 400 {
				t.Errorf("100,000 levels: %d %.200s", r.Status, r.Body)
			}
		}
		if r := e.Do("POST", "/admin/tenants", op.Token, []byte(`{"name":`+deep[:20000]+deep[100000:120000]+`}`), "Content-Type", "application/json"); r.Status != 400 {
			t.Errorf("a deep admin body: %d %s", r.Status, r.Body)
		}
	})

	t.Run("TLS", func(t *testing.T) {
		addr := strings.TrimPrefix(e.BaseURL, "https://")
		for _, tc := range []struct {
			name string
			conf func(*tls.Config)
			ok   bool
		}{
			{"TLS 1.0", func(c *tls.Config) { c.MinVersion, c.MaxVersion = tls.VersionTLS10, tls.VersionTLS10 }, false},
			{"TLS 1.1", func(c *tls.Config) { c.MinVersion, c.MaxVersion = tls.VersionTLS11, tls.VersionTLS11 }, false},
			{"TLS 1.2 CBC only", func(c *tls.Config) {
				c.MaxVersion = tls.VersionTLS12
				c.CipherSuites = []uint16{
					tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA,
					tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
					tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA, tls.TLS_RSA_WITH_AES_128_CBC_SHA, tls.TLS_RSA_WITH_AES_256_CBC_SHA,
				}
			}, false},
			{"TLS 1.2 RSA key exchange, GCM", func(c *tls.Config) {
				c.MaxVersion = tls.VersionTLS12
				c.CipherSuites = []uint16{tls.TLS_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_RSA_WITH_AES_256_GCM_SHA384}
			}, false},
			{"TLS 1.2 AEAD", func(c *tls.Config) { c.MaxVersion = tls.VersionTLS12 }, true},
			{"TLS 1.3", func(c *tls.Config) { c.MinVersion = tls.VersionTLS13 }, true},
		} {
			conf := tlsConfig(e)
			tc.conf(conf)
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, conf)
			if err == nil {
				conn.Close()
			}
			if (err == nil) != tc.ok {
				t.Errorf("%s: handshake error %v, want success %v", tc.name, err, tc.ok)
			}
		}
	})

	good.check(t)
	// The server is still whole: every good store reads back after a
	// restart, and check finds nothing wrong.
	var listed struct{ UUIDs []string }
	json.Unmarshal(e.Do("GET", "/vcons?limit=1000", k.Token, nil).Body, &listed)
	if len(listed.UUIDs) == 0 {
		t.Fatal("nothing listed")
	}
	checkClean(t, e)
}

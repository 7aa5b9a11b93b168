package server_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/server"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

func dialTLS(t *testing.T, e *testenv.Env) *tls.Conn {
	t.Helper()
	cfg := e.HTTPClient().Transport.(*http.Transport).TLSClientConfig.Clone()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", strings.TrimPrefix(e.BaseURL, "https://"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// head is a request's head; a body of length -1 is sent chunked.
func head(method, path, token, contentType string, length int64, extra ...string) string {
	h := method + " " + path + " HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + token + "\r\nContent-Type: " + contentType + "\r\n"
	if length >= 0 {
		h += fmt.Sprintf("Content-Length: %d\r\n", length)
	} else {
		h += "Transfer-Encoding: chunked\r\n"
	}
	for _, x := range extra {
		h += x + "\r\n"
	}
	return h + "\r\n"
}

// chunked encodes body in 32 KiB chunks, with the last chunk when done.
func chunked(body []byte, done bool) []byte {
	var b bytes.Buffer
	for len(body) > 0 {
		n := min(len(body), 32<<10)
		fmt.Fprintf(&b, "%x\r\n", n)
		b.Write(body[:n])
		b.WriteString("\r\n")
		body = body[n:]
	}
	if done {
		b.WriteString("0\r\n\r\n")
	}
	return b.Bytes()
}

// wholeFirst is a client that writes its whole request, head and body, and
// only then reads the answer, as Python's requests and http.client do.
func wholeFirst(t *testing.T, e *testenv.Env, request []byte) (*http.Response, []byte, *tls.Conn) {
	t.Helper()
	conn := dialTLS(t, e)
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := conn.Write(request); err != nil {
		t.Fatalf("writing the request (%d bytes): %v: the server closed the connection before reading it all", len(request), err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer after writing the whole request: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the answer's body: %v", err)
	}
	// After the answer, the server closes the connection cleanly.
	if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("after the answer: %d bytes, %v; want the end of the connection", n, err)
	}
	return resp, b, conn
}

const tooLarge = `{"error":"the vCon is larger than max_vcon_size allows"}` + "\n"

// TestRefusedBodyWholeFirst: a client that writes a body of 20 times
// max_vcon_size before it reads anything reads the 413 and its JSON error,
// over real TLS, whether the length is announced or the body is chunked;
// so do refusals of bodies cut short for other reasons. A client that
// stops at the refusal is answered at once, and the server goes on.
func TestRefusedBodyWholeFirst(t *testing.T) {
	const max = 1 << 20
	e := testenv.New(t, testenv.Options{MaxVconSize: "1MiB"})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	u := ids.NewRandom().String()
	huge := append([]byte(`{"uuid":"`+u+`","x":"`), bytes.Repeat([]byte("a"), 20*max)...)
	huge = append(huge, `"}`...)

	for _, c := range []struct {
		name    string
		request []byte
		status  int
		body    string
	}{
		{"ContentLength", append([]byte(head("POST", "/vcons", k.Token, "application/vcon", int64(len(huge)))), huge...), 413, tooLarge},
		{"Chunked", append([]byte(head("POST", "/vcons", k.Token, "application/vcon", -1)), chunked(huge, true)...), 413, tooLarge},
		{"PUT", append([]byte(head("PUT", "/vcons/"+u, k.Token, "application/vcon", int64(len(huge)))), huge...), 413, tooLarge},
		{"WrongType", append([]byte(head("POST", "/vcons", k.Token, "text/plain", int64(len(huge)))), huge...), 415,
			`{"error":"send the vCon as application/vcon, application/vcon+json, application/json or application/vcon+gzip"}` + "\n"},
		// Within max_vcon_size, refused at its 8th byte: the rest is unread.
		{"NotJSON", append([]byte(head("POST", "/vcons", k.Token, "application/vcon", max)), append([]byte(`{"x": 01`), bytes.Repeat([]byte(" "), max-8)...)...), 400,
			`{"error":"not a vCon this server can keep: not valid JSON: number with a leading zero at byte 6"}` + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body, _ := wholeFirst(t, e, c.request)
			if resp.StatusCode != c.status || string(body) != c.body {
				t.Errorf("%d %q, want %d %q", resp.StatusCode, body, c.status, c.body)
			}
			if !resp.Close || resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("close %v, headers %v: want Connection: close and JSON", resp.Close, resp.Header)
			}
		})
	}

	t.Run("WellBehaved", func(t *testing.T) {
		// Go's client reads while it writes, and stops at the refusal.
		r := e.Do("POST", "/vcons", k.Token, huge, "Content-Type", "application/vcon")
		if r.Status != 413 || string(r.Body) != tooLarge {
			t.Errorf("%d %q", r.Status, r.Body)
		}
	})

	t.Run("ExpectContinue", func(t *testing.T) {
		// curl's way: the head only, until the server says to go on. It is
		// refused at once, and nothing waits for a body never sent.
		conn := dialTLS(t, e)
		conn.SetDeadline(time.Now().Add(20 * time.Second))
		start := time.Now()
		io.WriteString(conn, head("POST", "/vcons", k.Token, "application/vcon", int64(len(huge)), "Expect: 100-continue"))
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 413 || string(b) != tooLarge {
			t.Errorf("%d %q", resp.StatusCode, b)
		}
		if _, err := br.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("after the answer: %v, want the end of the connection", err)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("answered and closed after %v: the server waited for a body", took)
		}
	})

	t.Run("StillServes", func(t *testing.T) {
		body := []byte(`{"uuid":"` + u + `","parties":[]}`)
		if r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("a store after the refusals: %d %s", r.Status, r.Body)
		}
		if r := e.Do("GET", "/vcons/"+u, k.Token, nil); r.Status != 200 || !bytes.Equal(r.Body, body) {
			t.Fatalf("read back: %d %q", r.Status, r.Body)
		}
	})
}

// sendUntilCut writes the request head, then first, then a chunk of more
// every pause until a write fails; the answer is read meanwhile. It
// returns the answer's status, the bytes of body written and how long
// after the head the writes failed.
func sendUntilCut(t *testing.T, e *testenv.Env, head string, first, more []byte, pause time.Duration) (int, int64, time.Duration) {
	t.Helper()
	conn := dialTLS(t, e)
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	status := make(chan int, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			status <- 0
			return
		}
		status <- resp.StatusCode
	}()
	start := time.Now()
	io.WriteString(conn, head)
	written := int64(0)
	for p := first; ; p = more {
		n, err := conn.Write(p)
		written += int64(n)
		if err != nil {
			break
		}
		if time.Since(start) > 40*time.Second {
			t.Fatalf("the server still reads after %v and %d bytes", time.Since(start), written)
		}
		time.Sleep(pause)
	}
	took := time.Since(start)
	select {
	case s := <-status:
		return s, written, took
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
	}
	return 0, 0, 0
}

// TestRefusedBodyBounds: the reading of a refused body stops at
// Limits.RefusedBodyBytes and Limits.RefusedBodyTime, and a body announced
// past the byte bound is not read at all; the refusal is sent first, so a
// client reading as it writes has it either way.
func TestRefusedBodyBounds(t *testing.T) {
	e := testenv.New(t, testenv.Options{MaxVconSize: "64KiB", Limits: server.Limits{RefusedBodyBytes: 1 << 20, RefusedBodyTime: 2 * time.Second}})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write")
	block := bytes.Repeat([]byte("a"), 256<<10)
	first := append([]byte(`{"x": "`), block...) // JSON until past max_vcon_size

	t.Run("AnnouncedPastBound", func(t *testing.T) {
		status, written, took := sendUntilCut(t, e, head("POST", "/vcons", k.Token, "application/vcon", 1<<30), first, block, 0)
		if status != 413 {
			t.Errorf("status %d, want 413", status)
		}
		t.Logf("cut after %d bytes, %v", written, took)
		if took > 10*time.Second {
			t.Errorf("the server read a body announced past the bound for %v", took)
		}
	})

	t.Run("ChunkedPastBound", func(t *testing.T) {
		status, written, took := sendUntilCut(t, e, head("POST", "/vcons", k.Token, "application/vcon", -1), chunked(first, false), chunked(block, false), 0)
		if status != 413 {
			t.Errorf("status %d, want 413", status)
		}
		t.Logf("cut after %d bytes, %v", written, took)
		// 64 KiB read, 1 MiB dropped, and what the sockets' buffers held.
		if written > 64<<20 || took > 10*time.Second {
			t.Errorf("the server read %d bytes for %v past a bound of 1 MiB", written, took)
		}
	})

	t.Run("TimeBound", func(t *testing.T) {
		status, written, took := sendUntilCut(t, e, head("POST", "/vcons", k.Token, "application/vcon", -1), chunked(first, false), chunked([]byte("a"), false), 50*time.Millisecond)
		if status != 413 {
			t.Errorf("status %d, want 413", status)
		}
		t.Logf("cut after %d bytes, %v", written, took)
		if took < time.Second || took > 10*time.Second {
			t.Errorf("a trickled body was read for %v, want about the 2 s bound", took)
		}
	})
}

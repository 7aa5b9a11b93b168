package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// BenchmarkLogTrees: stores and reads a second of the real binary, and of
// the same binary built without the logs' trees (-tags nologtree: each
// audit record a row only, no checkpoints), each on a data directory of
// its own, in rounds that alternate between the two so that both see the
// same machine. It reports both rates and with/without, which issue 28
// wants at 0.95 or more for each. Run:
//
//	go test ./test/e2e -run '^$' -bench LogTrees -benchtime 1x
func BenchmarkLogTrees(b *testing.B) {
	type side struct {
		e       *testenv.Env
		p       *testenv.Proc
		token   string
		uuids   []string
		clients []*http.Client
	}
	start := func(trees bool) *side {
		s := &side{e: testenv.Prepare(b, testenv.Options{Listen: testenv.FreePort(b)})}
		s.token = s.e.NewKey(s.e.Tenant("acme"), "write", "read").Token
		if trees {
			s.p = s.e.StartBinary()
		} else {
			s.p = s.e.StartWithoutLogTrees()
		}
		for range benchClients {
			s.clients = append(s.clients, s.e.HTTPClient())
		}
		return s
	}
	with, without := start(true), start(false)
	const n, rounds = 1500, 3
	store := func(s *side, n int) float64 {
		made := make([]string, n)
		var next atomic.Int64
		t0 := time.Now()
		parallel(b, n, func(c int) error {
			u := ids.NewRandom().String()
			req, _ := http.NewRequest("POST", s.e.BaseURL+"/vcons", bytes.NewReader(vcon4k(u)))
			req.Header.Set("Authorization", "Bearer "+s.token)
			req.Header.Set("Content-Type", "application/vcon")
			if err := expect(s.clients[c], req, 201); err != nil {
				return err
			}
			made[next.Add(1)-1] = u
			return nil
		})
		rate := float64(n) / time.Since(t0).Seconds()
		s.uuids = append(s.uuids, made...)
		return rate
	}
	read := func(s *side, n int) float64 {
		var next atomic.Int64
		t0 := time.Now()
		parallel(b, n, func(c int) error {
			req, _ := http.NewRequest("GET", s.e.BaseURL+"/vcons/"+s.uuids[next.Add(1)%int64(len(s.uuids))], nil)
			req.Header.Set("Authorization", "Bearer "+s.token)
			return expect(s.clients[c], req, 200)
		})
		return float64(n) / time.Since(t0).Seconds()
	}
	store(with, 200) // warm up
	store(without, 200)
	b.ResetTimer()
	var storeOn, storeOff, readOn, readOff float64
	for range b.N * rounds {
		storeOn += store(with, n)
		storeOff += store(without, n)
		readOn += read(with, 2*n)
		readOff += read(without, 2*n)
	}
	b.StopTimer()
	b.ReportMetric(storeOn/storeOff, "store-with/without")
	b.ReportMetric(readOn/readOff, "read-with/without")
	k := float64(b.N * rounds)
	b.ReportMetric(storeOn/k, "stores/s-with")
	b.ReportMetric(storeOff/k, "stores/s-without")
	b.ReportMetric(readOn/k, "reads/s-with")
	b.ReportMetric(readOff/k, "reads/s-without")
	with.p.Stop()
	without.p.Stop()
	if out, errOut, code := with.e.TryCLI("audit", "verify", "--tenant", "acme"); code != 0 {
		b.Fatalf("audit verify of the log the benchmark wrote: exit %d %s%s", code, out, errOut)
	}
}

// expect does req on c and wants the status want.
func expect(c *http.Client, req *http.Request, want int) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d, want %d", req.Method, req.URL.Path, resp.StatusCode, want)
	}
	return nil
}

package webhooks

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
	"github.com/vcon-server/vcon-server/test/kit/webhooktest"
)

// benchBody is a vCon of about 4 KiB.
func benchBody(u string) []byte {
	b := apitest.NewVcon(u, "bench", "+15550100000")
	return append(b[:len(b)-1], []byte(`,"pad":"`+strings.Repeat("p", 4000)+`"}`)...)
}

// ingest stores n vCons from c clients at once and returns stores a second.
func ingest(b *testing.B, e *testenv.Env, token string, n, c int) float64 {
	b.Helper()
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = benchBody(ids.NewRandom().String())
	}
	var wg sync.WaitGroup
	next := make(chan []byte, n)
	for _, body := range bodies {
		next <- body
	}
	close(next)
	errs := make(chan error, c)
	start := time.Now()
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for body := range next {
				req, _ := http.NewRequest("POST", e.BaseURL+"/vcons", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/vcon")
				resp, err := e.Client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 201 {
					errs <- fmt.Errorf("POST: %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return float64(n) / took.Seconds()
}

// BenchmarkIngestWebhook: stores a second for a tenant without a webhook
// and for one with a webhook whose receiver (over TLS) takes every event,
// in rounds that alternate on one server, each round's events delivered
// before the next starts. It reports both rates and on/off, which issue
// 18 wants at 0.9 or more. Run: go test ./test/webhooks -run '^$'
// -bench IngestWebhook -benchtime 1x
func BenchmarkIngestWebhook(b *testing.B) {
	e := testenv.Prepare(b, testenv.Options{})
	e.WriteConfig(webhooktest.AllowLoopback)
	e.Start()
	rcv := webhooktest.Start(b, b.TempDir())
	off := e.NewKey(e.Tenant("off"), "write").Token
	on := e.NewKey(e.Tenant("on"), "write").Token
	e.CLI("tenant", "set-webhook", "on", rcv.URL, "--secret-file", rcv.SecretFile, "--ca-file", rcv.CAFile)
	const n, clients, rounds = 1500, 8, 3
	ingest(b, e, off, 200, clients) // warm up
	ingest(b, e, on, 200, clients)
	rcv.WaitFor(b, 200, time.Minute)
	b.ResetTimer()
	var rateOff, rateOn float64
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			rateOff += ingest(b, e, off, n, clients) / rounds
			rateOn += ingest(b, e, on, n, clients) / rounds
			rcv.WaitFor(b, 200+(r+1)*n+i*rounds*n, 2*time.Minute)
		}
	}
	b.StopTimer()
	rateOff /= float64(b.N)
	rateOn /= float64(b.N)
	b.ReportMetric(rateOff, "stores/s-off")
	b.ReportMetric(rateOn, "stores/s-on")
	b.ReportMetric(rateOn/rateOff, "on/off")
	if _, _, bad := rcv.Stats(); len(bad) > 0 {
		b.Fatalf("badly signed deliveries: %v", bad)
	}
}

// BenchmarkIdempotentRetry: the time of a store of a new vCon, and of a
// retry of the current version's bytes (which seals and hashes the body,
// then finds the version in the catalog and removes its own object).
func BenchmarkIdempotentRetry(b *testing.B) {
	e := testenv.New(b, testenv.Options{})
	token := e.NewKey(e.Tenant("acme"), "write").Token
	post := func(body []byte, want int) {
		req, _ := http.NewRequest("POST", e.BaseURL+"/vcons", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/vcon")
		resp, err := e.Client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			b.Fatalf("POST: %d, want %d", resp.StatusCode, want)
		}
	}
	b.Run("store", func(b *testing.B) {
		bodies := make([][]byte, b.N)
		for i := range bodies {
			bodies[i] = benchBody(ids.NewRandom().String())
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			post(bodies[i], 201)
		}
	})
	b.Run("retry", func(b *testing.B) {
		body := benchBody(ids.NewRandom().String())
		post(body, 201)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			post(body, 200)
		}
	})
}

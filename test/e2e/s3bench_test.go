package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/s3sig"
	"github.com/vcon-server/vcon-server/seal"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

const clients = 16

func run16(b *testing.B, fn func(i int64) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if err := fn(i - 1); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkS3 compares, in one run on one versitygw, vcon-server storing
// and reading 4 KiB vCons over TLS with storage.objects = "s3" (16
// clients) against raw PutObject and GetObject of the same number of
// sealed bytes by the same client library (16 goroutines): the ratios are
// what the server adds (TLS in front, sealing, inspection, the catalog).
func BenchmarkS3(b *testing.B) {
	srv := s3test.Start(b, "versitygw")
	ctx := context.Background()
	sealed := int64(seal.SealedSize(4096))

	b.Run("raw-put", func(b *testing.B) {
		c, bucket := srv.Client(b), srv.NewBucket(b, false)
		payload := bytes.Repeat([]byte("x"), int(sealed))
		b.SetBytes(sealed)
		run16(b, func(i int64) error {
			_, err := c.PutObject(ctx, bucket, fmt.Sprintf("o/%d", i), bytes.NewReader(payload), sealed, s3sig.PutOptions{IfNoneMatch: true})
			return err
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	})
	b.Run("raw-get", func(b *testing.B) {
		c, bucket := srv.Client(b), srv.NewBucket(b, false)
		payload := bytes.Repeat([]byte("x"), int(sealed))
		for i := 0; i < 256; i++ {
			c.PutObject(ctx, bucket, fmt.Sprintf("o/%d", i), bytes.NewReader(payload), sealed, s3sig.PutOptions{})
		}
		b.SetBytes(sealed)
		b.ResetTimer()
		run16(b, func(i int64) error {
			r, err := c.GetObject(ctx, bucket, fmt.Sprintf("o/%d", i%256), s3sig.GetOptions{})
			if err != nil {
				return err
			}
			defer r.Body.Close()
			_, err = io.Copy(io.Discard, r.Body)
			return err
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	})

	e := testenv.New(b, testenv.Options{Storage: srv.StorageTOML(b, srv.NewBucket(b, false), "")})
	k := e.NewKey(e.Tenant("acme"), "write", "read")
	httpc := e.HTTPClient()
	do := func(req *http.Request, want int) error {
		req.Header.Set("Authorization", "Bearer "+k.Token)
		resp, err := httpc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != want {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	var stored []string
	var mu sync.Mutex
	b.Run("vcon-server-store", func(b *testing.B) {
		b.SetBytes(4096)
		run16(b, func(int64) error {
			u := ids.NewRandom().String()
			req, _ := http.NewRequest("POST", e.BaseURL+"/vcons", bytes.NewReader(vcon4k(u)))
			req.Header.Set("Content-Type", "application/vcon")
			if err := do(req, 201); err != nil {
				return err
			}
			mu.Lock()
			if len(stored) < 256 {
				stored = append(stored, u)
			}
			mu.Unlock()
			return nil
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	})
	b.Run("vcon-server-read", func(b *testing.B) {
		b.SetBytes(4096)
		run16(b, func(i int64) error {
			req, _ := http.NewRequest("GET", e.BaseURL+"/vcons/"+stored[i%int64(len(stored))], nil)
			return do(req, 200)
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	})
}

package parquet

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// benchServer starts the S3 server the benchmarks run on: versitygw, or
// the kind VCON_BENCH_S3 names.
func benchServer(b *testing.B) *s3test.Server {
	kind := os.Getenv("VCON_BENCH_S3")
	if kind == "" {
		kind = "versitygw"
	}
	return s3test.Start(b, kind)
}

// body4K is a vCon of about 4 KiB, so that its sealed object is too.
func body4K(uuid string) []byte {
	v := apitest.NewVcon(uuid, "bench", "+15555550100")
	pad := 4000 - len(v) - len(`,"pad":""`)
	return append(v[:len(v)-1], []byte(`,"pad":"`+strings.Repeat("x", pad)+`"}`)...)
}

// storeMany stores n vCons of about 4 KiB with 32 clients and returns their
// uuids.
func storeMany(b *testing.B, e *testenv.Env, token string, n int) []string {
	uuids := make([]string, n)
	for i := range uuids {
		uuids[i] = ids.NewRandom().String()
	}
	var wg sync.WaitGroup
	work := make(chan string)
	errs := make(chan error, 32)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := e.HTTPClient()
			for u := range work {
				req, _ := http.NewRequest("POST", e.BaseURL+"/vcons", bytes.NewReader(body4K(u)))
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/vcon")
				resp, err := client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 201 {
					errs <- &statusError{resp.StatusCode}
					return
				}
			}
		}()
	}
	for _, u := range uuids {
		work <- u
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	return uuids
}

type statusError struct{ code int }

func (s *statusError) Error() string { return "POST answered " + http.StatusText(s.code) }

// BenchmarkPackRun packs 20,000 objects of 4 KiB into one file: a whole
// pack run (reads, the file's PUT, the commit, the manifest, and the
// deletes of the objects). It reports versions packed per second.
//
//	go test ./test/parquet -run '^$' -bench PackRun -benchtime 1x
func BenchmarkPackRun(b *testing.B) {
	const n = 20000
	srv := benchServer(b)
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := testenv.New(b, testenv.Options{Storage: srv.StorageTOML(b, srv.NewBucket(b, false), "") + parquetTable(3600)})
		e.Daemon.PackRun(context.Background()) // the start-up run, with nothing to pack, is over
		k := e.NewKey(e.Tenant("acme"), "write", "read")
		storeMany(b, e, k.Token, n)
		b.StartTimer()
		start := time.Now()
		e.Daemon.PackRun(context.Background())
		total += time.Since(start)
		b.StopTimer()
		if !strings.Contains(e.Log.String(), "pack run files=1 versions=20000 failed=0") {
			b.Fatalf("the pack run did not pack the 20,000 objects:\n%s", tail(e.Log.String()))
		}
		if os.Getenv("VCON_BENCH_LOG") != "" {
			b.Log(tail(e.Log.String()))
		}
		e.Stop()
	}
	b.ReportMetric(float64(n*b.N)/total.Seconds(), "versions/s")
}

func tail(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
}

// BenchmarkReadPacked compares, on one server, the read of a packed
// version (one ranged GET of its row) with the read of a version still an
// object (one plain GET): over HTTPS through the whole server, and of the
// sealed bytes alone. Each iteration reads one of each; it reports their
// latencies and the ratio packed/object.
//
//	go test ./test/parquet -run '^$' -bench ReadPacked -benchtime 2000x
func BenchmarkReadPacked(b *testing.B) {
	const n = 200
	ctx := context.Background()
	srv := benchServer(b)
	e := testenv.New(b, testenv.Options{Storage: srv.StorageTOML(b, srv.NewBucket(b, false), "") + parquetTable(3600)})
	e.Daemon.PackRun(ctx)
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	packed := storeMany(b, e, k.Token, n)
	e.Daemon.PackRun(ctx)
	objects := storeMany(b, e, k.Token, n)
	versions := func(uuids []string, want catalog.Location) []catalog.Version {
		var out []catalog.Version
		for _, u := range uuids {
			v, err := e.Daemon.Cat.Current(ctx, ids.MustParse(tenant), ids.MustParse(u))
			if err != nil || v.Location != want {
				b.Fatalf("%s: %s (%v), want %s", u, v.Location, err, want)
			}
			out = append(out, v)
		}
		return out
	}
	pv, ov := versions(packed, catalog.Packed), versions(objects, catalog.InS3)
	client := e.HTTPClient()
	get := func(u string) time.Duration {
		start := time.Now()
		req, _ := http.NewRequest("GET", e.BaseURL+"/vcons/"+u, nil)
		req.Header.Set("Authorization", "Bearer "+k.Token)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("GET: %d", resp.StatusCode)
		}
		return time.Since(start)
	}
	sealed := func(v catalog.Version) time.Duration {
		start := time.Now()
		rc, err := e.Daemon.Archive.Sealed(ctx, v)
		if err != nil {
			b.Fatal(err)
		}
		nb, _ := io.Copy(io.Discard, rc)
		rc.Close()
		if nb != v.SealedSize {
			b.Fatalf("%d sealed bytes, want %d", nb, v.SealedSize)
		}
		return time.Since(start)
	}
	var httpP, httpO, rawP, rawO time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % n
		httpP += get(packed[j])
		httpO += get(objects[j])
		rawP += sealed(pv[j])
		rawO += sealed(ov[j])
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
	b.ReportMetric(per(httpP), "µs/packed-GET")
	b.ReportMetric(per(httpO), "µs/object-GET")
	b.ReportMetric(float64(httpP)/float64(httpO), "ratio-http")
	b.ReportMetric(per(rawP), "µs/packed-range")
	b.ReportMetric(per(rawO), "µs/object-get")
	b.ReportMetric(float64(rawP)/float64(rawO), "ratio-storage")
}

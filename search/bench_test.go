package search_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/vocab"
	"github.com/vcon-server/vcon-server/search"
	"github.com/vcon-server/vcon-server/test/kit/archivetest"
)

func benchArchive(b *testing.B) (*archive.Archive, ids.ID) {
	k := archivetest.New(b)
	return k.Archive(b, archive.Config{DefaultRetention: 30 * 24 * time.Hour}), k.Tenant
}

func tel(i int) string { return fmt.Sprintf("+1555%07d", i) }

// BenchmarkSearch measures the latency of a tel search in one tenant with
// VCON_BENCH_SEARCH_VERSIONS indexed versions (100,000 unless set; the
// figure in the docs is for 1,000,000), each with three tokens, every tel
// shared by ten versions. Rows go straight into the catalog: the index is
// what is measured, not ingest.
func BenchmarkSearch(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("VCON_BENCH_SEARCH_VERSIONS")); err == nil && v > 0 {
		n = v
	}
	a, tenant := benchArchive(b)
	ctx := context.Background()
	tk, err := a.TenantKey(ctx, tenant)
	if err != nil {
		b.Fatal(err)
	}
	key := tk.IndexKey()
	db := a.Cat.DB()
	start := time.Now()
	const batch = 20_000
	for lo := 0; lo < n; lo += batch {
		tx, err := db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		for i := lo; i < min(lo+batch, n); i++ {
			v, u := ids.NewV7(start), ids.NewRandom()
			exec := func(q string, args ...any) {
				if _, err := tx.Exec(q, args...); err != nil {
					b.Fatal(err)
				}
			}
			exec(`INSERT INTO vcons(tenant, uuid, current) VALUES (?, ?, ?)`, tenant[:], u[:], v[:])
			exec(`INSERT INTO versions(id, tenant, uuid, stored_at, content_type, content_encoding, form, size, sealed_size, wrapped_key, location)
				VALUES (?, ?, ?, 0, 'application/vcon', '', 'unsigned', 4096, 4200, x'00', 'dir')`, v[:], tenant[:], u[:])
			for _, tok := range []search.Token{search.Of(key, "tel", search.Normalize("tel", tel(i/10))), search.Of(key, "name", "caller "+strconv.Itoa(i)), search.Of(key, "mailto", strconv.Itoa(i)+"@example.com")} {
				exec(`INSERT INTO search_tokens(tenant, token, uuid, version) VALUES (?, ?, ?, ?)`, tenant[:], tok[:], u[:], v[:])
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("indexed %d versions in %s", n, time.Since(start).Round(time.Second))
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		got, err := a.Search(ctx, tenant, map[string]string{"tel": tel(rand.IntN(n / 10))}, ids.ID{}, 100)
		lat = append(lat, time.Since(t0))
		if err != nil || len(got) != 10 {
			b.Fatalf("search: %d found, %v", len(got), err)
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(n), "versions")
}

// BenchmarkIngestSearch stores 4 KiB vCons from 16 goroutines with the
// tenant's search off and on, through the store path (seal, inspect,
// commit), to show what indexing costs.
func BenchmarkIngestSearch(b *testing.B) {
	for _, mode := range []vocab.SearchMode{vocab.SearchOff, vocab.SearchParties} {
		b.Run(string(mode), func(b *testing.B) {
			a, tenant := benchArchive(b)
			if _, err := a.Cat.SetSearch(context.Background(), tenant, mode, catalog.CLI); err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			b.SetBytes(4096)
			b.ResetTimer()
			for w := 0; w < 16; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						u := ids.NewRandom().String()
						body := fmt.Sprintf(`{"vcon":"0.4.0","uuid":%q,"parties":[{"tel":"+15555550101","name":"Ada Lovelace","mailto":"ada@example.com"},{"tel":"+15555550102"}],"pad":%q}`, u, bytes.Repeat([]byte("x"), 3900))
						_, err := a.Store(context.Background(), archive.StoreRequest{Tenant: tenant, Mode: catalog.CreateOnly, Body: bytes.NewReader([]byte(body)), ContentType: "application/vcon"})
						if err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "stores/s")
		})
	}
}

package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/benchkit"
	"github.com/vcon-server/vcon-server/test/kit/kmstest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

const benchClients = 16

// vcon4k is the 4 KiB vCon every ingest benchmark stores.
func vcon4k(uuid string) []byte { return benchkit.Vcon4K(uuid) }

// seedReads stores 200 vCons made by body for the read benchmarks, and
// makes their clients.
func seedReads(b *testing.B, e *testenv.Env, token string, body func(string) []byte) ([]string, []*http.Client) {
	b.Helper()
	uuids := make([]string, 200)
	for i := range uuids {
		uuids[i] = ids.NewRandom().String()
		if r := e.Do("POST", "/vcons", token, body(uuids[i]), "Content-Type", "application/vcon"); r.Status != 201 {
			b.Fatalf("store: %d %s", r.Status, r.Body)
		}
	}
	clients := make([]*http.Client, benchClients)
	for i := range clients {
		clients[i] = e.HTTPClient()
	}
	return uuids, clients
}

// parallel runs n calls of fn over benchClients goroutines.
func parallel(b *testing.B, n int, fn func(client int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, benchClients)
	for c := 0; c < benchClients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := fn(c); err != nil {
					errs <- err
					return
				}
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// peakRSS reads a process's high-water resident set size in bytes.
func peakRSS(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb * 1024
		}
	}
	return 0
}

// BenchmarkIngest stores 4 KiB vCons from 16 concurrent clients over TLS
// into the real binary on a data directory (with VCON_CPUPROFILE_DIR set,
// the binary writes its CPU profile there: testenv.StartProfiled).
// Compare with BenchmarkIngestBaseline: the same bytes written and fsynced
// as files.
func BenchmarkIngest(b *testing.B) { ingest(b, nil, false) }

// BenchmarkIngestKMS is BenchmarkIngest with the master key wrapped by a
// KMS (local-kms, AWS KMS's API): the server asks it once, at start, so
// the goal is at least 0.97x BenchmarkIngest's stores/s in the same run.
func BenchmarkIngestKMS(b *testing.B) { ingest(b, kmstest.StartLocalKMS(b), false) }

// BenchmarkIngestOwnKey is BenchmarkIngestKMS with the tenant's key
// wrapped by a KMS key of its own: the server asks the KMS once per
// kms.key_cache, so the goal is at least 0.97x BenchmarkIngest's.
func BenchmarkIngestOwnKey(b *testing.B) { ingest(b, kmstest.StartLocalKMS(b), true) }

// keyed prepares a server with its master key wrapped by a (nil: the
// file key) and, with own, the tenant acme's key by a key of its own.
func keyed(b *testing.B, a *kmstest.AWS, own bool) *testenv.Env {
	storage := ""
	if a != nil {
		storage = a.TOML()
	}
	e := testenv.Prepare(b, testenv.Options{Listen: testenv.FreePort(b), Storage: storage})
	e.Tenant("acme")
	if own {
		e.CLI("tenant", "set-key", "acme", "--kms-key", a.CreateKey(b))
	}
	return e
}

func ingest(b *testing.B, a *kmstest.AWS, own bool) {
	e := keyed(b, a, own)
	k := e.NewKey("acme", "write")
	p := e.StartProfiled("ingest")
	clients := make([]*http.Client, benchClients)
	for i := range clients {
		clients[i] = e.HTTPClient()
	}
	b.SetBytes(4096)
	b.ResetTimer()
	parallel(b, b.N, func(c int) error {
		body := vcon4k(ids.NewRandom().String())
		req, _ := http.NewRequest("POST", e.BaseURL+"/vcons", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+k.Token)
		req.Header.Set("Content-Type", "application/vcon")
		return expect(clients[c], req, 201)
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "stores/s")
	b.ReportMetric(peakRSS(p.Pid())/(1<<20), "peak-RSS-MiB")
	p.Stop()
	if p.Profile != "" {
		b.Logf("server CPU profile: %s", p.Profile)
	}
}

// BenchmarkRead reads 4 KiB vCons back from 16 concurrent clients over
// TLS from the real binary on a data directory.
func BenchmarkRead(b *testing.B) { read(b, nil, false) }

// BenchmarkReadKMS is BenchmarkRead with the master key wrapped by a KMS:
// the goal is at least 0.97x BenchmarkRead's reads/s in the same run.
func BenchmarkReadKMS(b *testing.B) { read(b, kmstest.StartLocalKMS(b), false) }

// BenchmarkReadOwnKey is BenchmarkReadKMS with the tenant's key wrapped by
// a KMS key of its own: the goal is at least 0.97x BenchmarkRead's.
func BenchmarkReadOwnKey(b *testing.B) { read(b, kmstest.StartLocalKMS(b), true) }

func read(b *testing.B, a *kmstest.AWS, own bool) {
	e := keyed(b, a, own)
	k := e.NewKey("acme", "write", "read")
	p := e.StartProfiled("read")
	uuids, clients := seedReads(b, e, k.Token, vcon4k)
	var n atomic.Int64
	b.SetBytes(4096)
	b.ResetTimer()
	parallel(b, b.N, func(c int) error {
		req, _ := http.NewRequest("GET", e.BaseURL+"/vcons/"+uuids[n.Add(1)%int64(len(uuids))], nil)
		req.Header.Set("Authorization", "Bearer "+k.Token)
		return expect(clients[c], req, 200)
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
	p.Stop()
}

// BenchmarkIngestBaseline writes the same 4 KiB as new files with the
// same durability steps the data directory takes (temporary file, fsync,
// rename, directory fsync), from 16 goroutines: the floor for the disk.
func BenchmarkIngestBaseline(b *testing.B) {
	dir := b.TempDir()
	body := vcon4k(ids.NewRandom().String())
	d, err := os.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	b.SetBytes(4096)
	b.ResetTimer()
	parallel(b, b.N, func(int) error { return benchkit.WriteDurable(d, dir, body) })
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "stores/s")
}

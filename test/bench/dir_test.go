package bench

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/seal"
	"github.com/vcon-server/vcon-server/test/kit/benchkit"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// dirRows: vcon-server storing 4 KiB vCons into a data directory at 16
// clients, against 16 goroutines writing files of the same sealed size
// with the same durability steps (benchkit.WriteDurable) on the same file
// system (goal ≥ 1.0×); and the stores' p50 and p99.
func dirRows(t *testing.T, tb *table) {
	const clients = 16
	d := measureFor(t)
	e := testenv.Prepare(t, testenv.Options{Listen: testenv.FreePort(t)})
	a := newAPI(e, e.NewKey(e.Tenant("acme"), "write").Token)
	// Beside the server's data directory: the same file system.
	floor := e.Dir + "/floor"
	if err := os.Mkdir(floor, 0o700); err != nil {
		t.Fatal(err)
	}
	fd, err := os.Open(floor)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	body := bytes.Repeat([]byte("x"), int(seal.SealedSize(4096)))

	p := e.StartProfiled("dir-store")
	// This process runs the file loop and the server's clients.
	pids := []int{p.Pid(), os.Getpid()}
	r := abba(t, d,
		watch(t, pids, func(d time.Duration) result {
			return closedLoop(t, clients, d, func(int) error { return benchkit.WriteDurable(fd, floor, body) })
		}),
		watch(t, pids, func(d time.Duration) result {
			return closedLoop(t, clients, d, func(int) error {
				return a.do("POST", "/vcons", benchkit.Vcon4K(ids.NewRandom().String()), 201)
			})
		}))
	p.Stop()
	tb.add(row{
		figure:   fmt.Sprintf("data directory store, %d clients (vs write+fsync+rename+dir-fsync)", clients),
		server:   perSec(r[1].rate()),
		baseline: perSec(r[0].rate()),
		ratio:    ratio(r[1].rate(), r[0].rate()),
		goal:     "≥ 1.00×",
		met:      yes(r[1].rate() >= r[0].rate()),
	})
	const vcon, self = 0, 1
	tb.add(row{
		figure: "data directory store, 16 clients: CPU per operation",
		server: fmt.Sprintf("vcon-server %s + clients %s (%.2f cores; the machine %.2f)",
			micros(r[1].cpuPerOp(vcon)), micros(r[1].cpuPerOp(self)), r[1].cores(vcon, self), r[1].cores()),
		baseline: fmt.Sprintf("file loop %s (%.2f cores; the machine %.2f)", micros(r[0].cpuPerOp(self)), r[0].cores(self), r[0].cores()),
		ratio:    "—",
		goal:     "—",
	})
	latencyRow(tb, "data directory store latency, 16 clients", r[1], "file loop", r[0])
}

// Package replicabench measures what the replica costs a store (issue
// 31, "the replica almost free"), for `make replica-bench` (test/replica)
// and `make perf` (test/bench) alike, so that both print the same figures
// by the same method:
//
//  1. 8 clients store 4 KiB vCons into the real binary for a turn, with
//     the replica off, max_lag = 1 and max_lag = 0, on data-directory
//     storage with the replica in a directory and on S3 storage with the
//     replica in the bucket; each turn on a new data directory (and a new
//     bucket), after a second's warm-up, its server the only one running;
//  2. every configuration has one turn a round, and each round runs them
//     in the reverse order of the round before, so that a slow moment of
//     a shared host falls on every configuration alike;
//  3. a configuration's figure is the median of its rounds, and its ratio
//     is that median over the median of the replica off on the same
//     storage in the same run: never a figure against another run's.
package replicabench

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/benchkit"
	"github.com/vcon-server/vcon-server/test/kit/promtext"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// Clients is how many clients store at once, as the issue measures.
const Clients = 8

// Off is Config.Lag with no replica.
const Off = -1

// Config is one configuration measured.
type Config struct {
	S3    bool   // S3 storage with the replica in the bucket; else the data directory with the replica in a directory
	Lag   int    // max_lag, or Off
	Other string // another build of vcon-server that serves it (Options.Other); "" for this tree's
}

// Storage names the storage and where its replica goes.
func (c Config) Storage() string {
	if c.S3 {
		return "S3, replica in the bucket"
	}
	return "data directory, replica in a directory"
}

// Replica names the replica's setting.
func (c Config) Replica() string {
	if c.Lag == Off {
		return "replica off"
	}
	if c.Other != "" {
		return "other build" // at max_lag = 0
	}
	return fmt.Sprintf("max_lag = %d", c.Lag)
}

// Turn is one configuration's figures in one round.
type Turn struct {
	Stores   int
	Elapsed  time.Duration
	P50, P99 time.Duration
	// Bytes and Objects are what the server uploaded to the replica
	// during the turn (vcon_replica_uploaded_bytes_total and
	// _objects_total, the head's rewrites included).
	Bytes, Objects float64
}

// Rate is the turn's stores a second.
func (t Turn) Rate() float64 { return float64(t.Stores) / t.Elapsed.Seconds() }

// Result is one configuration's turns, in round order.
type Result struct {
	Config
	Turns []Turn
	off   *Result // the replica off on the same storage; itself when off
}

// Rate is the median of the rounds' stores a second.
func (r *Result) Rate() float64 { return median(r.Turns, Turn.Rate) }

// P50 is the median of the rounds' p50.
func (r *Result) P50() time.Duration {
	return time.Duration(median(r.Turns, func(t Turn) float64 { return float64(t.P50) }))
}

// P99 is the median of the rounds' p99.
func (r *Result) P99() time.Duration {
	return time.Duration(median(r.Turns, func(t Turn) float64 { return float64(t.P99) }))
}

// Off is the replica-off result on the same storage, from the same run.
func (r *Result) Off() *Result { return r.off }

// Ratio is Rate over the replica off's.
func (r *Result) Ratio() float64 { return r.Rate() / r.off.Rate() }

// RoundRatios are the least and the greatest of the rounds' ratios, each
// round's rate over the replica off's in that round: their spread says how
// much the host's noise moved the figure.
func (r *Result) RoundRatios() (lo, hi float64) {
	v := make([]float64, len(r.Turns))
	for i, t := range r.Turns {
		v[i] = t.Rate() / r.off.Turns[i].Rate()
	}
	return slices.Min(v), slices.Max(v)
}

// PerVersion is what was uploaded to the replica per stored version, in
// bytes and in objects, over all rounds.
func (r *Result) PerVersion() (bytes, objects float64) {
	var n int
	for _, t := range r.Turns {
		n += t.Stores
		bytes += t.Bytes
		objects += t.Objects
	}
	return bytes / float64(n), objects / float64(n)
}

func median(turns []Turn, f func(Turn) float64) float64 {
	v := make([]float64, len(turns))
	for i, t := range turns {
		v[i] = f(t)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// Options say what Run measures.
type Options struct {
	Turn   time.Duration // each turn's measured time
	Rounds int
	Dir    bool           // the data-directory configurations
	S3     *s3test.Server // the S3 configurations, on this server; nil: none
	// Other is the path of another build of vcon-server, measured at
	// max_lag = 0 in the same rounds as this tree's: two builds compared
	// in one run, since a change worth a few percent is less than what
	// separates two runs on a shared host.
	Other string
	// Targets is where each turn's replica directory is made (the test's
	// temporary directory when ""): another disk, as
	// docs/disaster-recovery.md asks, measures what an operator sees.
	Targets string
}

// Run measures every configuration Options asks for, Rounds times, and
// returns their results: per storage, the replica off, max_lag = 1 and
// max_lag = 0.
func Run(t testing.TB, o Options) []*Result {
	t.Helper()
	var results []*Result
	for _, s3 := range []bool{false, true} {
		if (s3 && o.S3 == nil) || (!s3 && !o.Dir) {
			continue
		}
		off := &Result{Config: Config{S3: s3, Lag: Off}}
		off.off = off
		results = append(results, off,
			&Result{Config: Config{S3: s3, Lag: 1}, off: off},
			&Result{Config: Config{S3: s3, Lag: 0}, off: off})
		if o.Other != "" {
			results = append(results, &Result{Config: Config{S3: s3, Lag: 0, Other: o.Other}, off: off})
		}
	}
	order := slices.Clone(results)
	for round := range o.Rounds {
		for _, r := range order {
			r.Turns = append(r.Turns, turn(t, o, r.Config))
		}
		t.Logf("replicabench: round %d of %d done", round+1, o.Rounds)
		slices.Reverse(order)
	}
	return results
}

// turn measures c once, on a new data directory (and bucket).
func turn(t testing.TB, o Options, c Config) Turn {
	t.Helper()
	opts := testenv.Options{Listen: testenv.FreePort(t), MinFree: "1MiB"}
	name := "replica-dir"
	if c.S3 {
		name = "replica-s3"
		opts.Storage = o.S3.StorageTOML(t, o.S3.NewBucket(t, false), "")
	}
	if c.Lag != Off {
		to := "s3"
		if !c.S3 {
			to = targetDir(t, o.Targets)
		}
		opts.Storage += fmt.Sprintf("\n[replica]\nto = %q\nmax_lag = %d\n", to, c.Lag)
		name += fmt.Sprintf("-lag%d", c.Lag)
	} else {
		name += "-off"
	}
	e := testenv.Prepare(t, opts)
	token := e.NewKey(e.Tenant("bench"), "write").Token
	ops := e.OperatorKey().Token
	// Each round's server writes over the one before's profile: a row's
	// profile is its last round's.
	var p *testenv.Proc
	if c.Other != "" {
		p = e.StartBinaryAt(c.Other)
	} else {
		p = e.StartProfiled(name)
	}
	defer p.Stop()
	client := e.HTTPClient()
	Store(t, e, client, token, time.Second) // the first generation, the connections
	bytes0, objects0 := uploaded(t, e, ops, c.Lag)
	tr := Store(t, e, client, token, o.Turn)
	bytes1, objects1 := uploaded(t, e, ops, c.Lag)
	tr.Bytes, tr.Objects = bytes1-bytes0, objects1-objects0
	return tr
}

// targetDir makes a new directory for a turn's replica in dir, removed
// when the test ends; in the test's temporary directory when dir is "".
func targetDir(t testing.TB, dir string) string {
	t.Helper()
	if dir == "" {
		return t.TempDir()
	}
	d, err := os.MkdirTemp(dir, "replica-")
	if err != nil {
		t.Fatalf("VCON_REPLICA_BENCH_TARGETS: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// Store stores 4 KiB vCons from Clients clients through client for d,
// each client storing again as soon as its store is acknowledged; a store
// that fails fails the test. The in-process profile of make replica-bench
// runs the same load.
func Store(t testing.TB, e *testenv.Env, client *http.Client, token string, d time.Duration) Turn {
	t.Helper()
	lat, elapsed := benchkit.ClosedLoop(t, Clients, d, func(int) error {
		return post(client, e.BaseURL, token, benchkit.Vcon4K(ids.NewRandom().String()))
	})
	if len(lat) == 0 {
		t.Fatalf("no store ended in %s", d)
	}
	slices.Sort(lat)
	// Nearest rank: the smallest latency at least p% of the stores kept.
	return Turn{Stores: len(lat), Elapsed: elapsed, P50: lat[(len(lat)+1)/2-1], P99: lat[(len(lat)*99+99)/100-1]}
}

func post(client *http.Client, base, token string, body []byte) error {
	req, err := http.NewRequest("POST", base+"/vcons", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/vcon")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("POST /vcons: %d, want 201: %.200s", resp.StatusCode, b)
	}
	return nil
}

// uploaded reads vcon_replica_uploaded_bytes_total and _objects_total
// once the replica has caught up: the server copies its metrics once a
// second, so a read right after the stores would miss the last uploads.
func uploaded(t testing.TB, e *testenv.Env, token string, lag int) (bytes, objects float64) {
	t.Helper()
	if lag == Off {
		return 0, 0
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		time.Sleep(1200 * time.Millisecond)
		r := e.Do("GET", "/metrics", token, nil)
		fams, err := promtext.Parse(strings.NewReader(string(r.Body)))
		if r.Status != 200 || err != nil {
			t.Fatalf("GET /metrics: %d, %v", r.Status, err)
		}
		if lagNow, _ := fams.Value("vcon_replica_lag_seconds"); lagNow == 0 || time.Now().After(deadline) {
			b, _ := fams.Value("vcon_replica_uploaded_bytes_total")
			n, _ := fams.Value("vcon_replica_uploaded_objects_total")
			return b, n
		}
	}
}

package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// The knobs, all environment variables:
//
//	VCON_PERF=1                run at all (make perf sets it)
//	VCON_PERF_SECONDS=5        seconds each throughput is measured
//	VCON_PERF_READS=1000       reads of each kind at 1 client (packed row)
//	VCON_PERF_PACK=10000       versions of the pack run
//	VCON_PERF_VERSIONS=100000  versions stored after the first 10,000 (RSS
//	                           row); the export exports all of them
//	VCON_PERF_ROWS=s3,dir,...  only these groups: s3, dir, packed, pack, rss,
//	                           replica
//	VCON_PERF_OUT=file         also write the table there
//	VCON_CPUPROFILE_DIR=dir    write the server's CPU profile per row there
//	                           (testenv.StartProfiled) and print each
//	                           profile's top lines after the table
//	VCON_BENCH_S3=minio        another S3 server than versitygw
func envInt(t testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(strings.ReplaceAll(v, "_", ""))
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a whole number above 0", name, v)
	}
	return n
}

// smoke, set by TestPerfSmoke, shortens every load to a second.
var smoke bool

func measureFor(t testing.TB) time.Duration {
	if smoke {
		return time.Second
	}
	return time.Duration(envInt(t, "VCON_PERF_SECONDS", 5)) * time.Second
}

// row is one line of the table.
type row struct {
	figure, server, baseline, ratio, goal string
	met                                   string // "yes", "no" or "" (no goal)
}

// table collects the rows from every group, in the order they end.
type table struct {
	mu   sync.Mutex
	rows []row
}

func (tb *table) add(r row) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.rows = append(tb.rows, r)
}

func (tb *table) markdown() string {
	var b strings.Builder
	b.WriteString("| figure | vcon-server | baseline | ratio | goal | met |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, r := range tb.rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.figure, r.server, r.baseline, r.ratio, r.goal, r.met)
	}
	return b.String()
}

// yes is the met column for a goal that holds when ok.
func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// groups are the table's parts, each with its own servers.
var groups = []struct {
	name string
	run  func(t *testing.T, tb *table)
}{
	{"s3", s3Rows},
	{"dir", dirRows},
	{"packed", packedRows},
	{"pack", packRows},
	{"rss", rssRows},
	{"replica", replicaRows},
}

// TestPerf is `make perf`: every benchmark of issue 15, one table.
func TestPerf(t *testing.T) {
	if os.Getenv("VCON_PERF") != "1" {
		t.Skip("skipped: run make perf (VCON_PERF=1); knobs in test/bench/perf_test.go")
	}
	start := time.Now()
	head := describe(t)
	testenv.Binary(t) // built before any clock starts
	if testenv.CPUProfileDir() != "" {
		testenv.ProfiledBinary(t)
	}
	only := map[string]bool{}
	for _, g := range strings.Split(os.Getenv("VCON_PERF_ROWS"), ",") {
		if g != "" {
			only[g] = true
		}
	}
	tb := &table{}
	for _, g := range groups {
		if len(only) > 0 && !only[g.name] {
			continue
		}
		gs := time.Now()
		if !t.Run(g.name, func(t *testing.T) { g.run(t, tb) }) {
			tb.add(row{figure: g.name + ": **failed** (the log says why); its rows above, if any, are partial"})
		}
		t.Logf("%s: %.0f s", g.name, time.Since(gs).Seconds())
	}
	out := head + fmt.Sprintf("Whole run: %.0f s (load average at the end: %s).\n\n", time.Since(start).Seconds(), loadAvg()) + tb.markdown()
	if dir := testenv.CPUProfileDir(); dir != "" {
		out += profileTops(dir)
	}
	fmt.Print("\n" + out)
	if p := os.Getenv("VCON_PERF_OUT"); p != "" {
		if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// TestPerfSmoke runs two of TestPerf's groups in `make test`, with
// loads of a second and few reads, so that the benchmark keeps working as
// the server changes (its log lines, the catalog, the pack runs): it
// judges no figure.
func TestPerfSmoke(t *testing.T) {
	if os.Getenv("VCON_PERF") == "1" {
		t.Skip("TestPerf runs instead")
	}
	smoke = true
	defer func() { smoke = false }()
	tb := &table{}
	dirRows(t, tb)
	packedRows(t, tb)
	if len(tb.rows) != 6 || !strings.Contains(tb.markdown(), "| data directory store, 16 clients") {
		t.Fatalf("the table:\n%s", tb.markdown())
	}
}

// describe is the table's heading: the tree measured and the machine.
func describe(t testing.TB) string {
	root := testenv.ModuleRoot(t)
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			return "?"
		}
		return strings.TrimSpace(string(out))
	}
	dirty := ""
	if st := git("status", "--porcelain", "--untracked-files=no"); st != "" && st != "?" {
		dirty = " with uncommitted changes"
	}
	return fmt.Sprintf("Issue 15 benchmark, %s, commit %s%s; %d seconds a load, load average at the start: %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), git("rev-parse", "--short", "HEAD"), dirty, envInt(t, "VCON_PERF_SECONDS", 5), loadAvg())
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// profileTops is the top lines of every profile in dir, by flat CPU.
func profileTops(dir string) string {
	files, _ := filepath.Glob(filepath.Join(dir, "*.pprof"))
	var b strings.Builder
	for _, f := range files {
		// By flat time (the leaves) and by cumulative time (where they are
		// called from, as the profiles are described).
		for _, how := range [][]string{{"-top"}, {"-top", "-cum"}} {
			args := append(append([]string{"tool", "pprof"}, how...), "-nodecount=12", f)
			out, err := exec.Command("go", args...).CombinedOutput()
			fmt.Fprintf(&b, "\n%s (%s):\n", filepath.Base(f), strings.Join(how, " "))
			if err != nil {
				fmt.Fprintf(&b, "    (pprof: %v)\n", err)
			}
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if strings.HasPrefix(l, "File:") || strings.HasPrefix(l, "Build ID:") || strings.HasPrefix(l, "Type:") || strings.HasPrefix(l, "Time:") || strings.HasPrefix(l, "Showing") || strings.HasPrefix(l, "Dropped") {
					continue
				}
				b.WriteString("    " + l + "\n")
			}
		}
	}
	return b.String()
}

// Formatting for the table.
func perSec(r float64) string   { return thousands(int(r+0.5)) + "/s" }
func ratio(a, b float64) string { return fmt.Sprintf("%.2f×", a/b) }
func micros(d time.Duration) string {
	return thousands(int(d.Microseconds())) + " µs"
}
func millis(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
func mib(b float64) string          { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

package scale

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/seal"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// tenantCount is how many tenants share every catalog.
const tenantCount = 10

// sweepInterval is serve's purge_interval while the sweep is measured.
const sweepInterval = 2 * time.Second

// columns are the measurements, in the table's order, with what each
// one's time is divided by.
var columns = []struct{ name, per string }{
	{"check", "version in the catalog"},
	{"check --deep", "version in the catalog"},
	{"export parquet", "row exported (one tenant, level counts, to a directory)"},
	{"purge sweep", "version purged (a tenth of them, at retention 0d)"},
	{"listing", "uuid listed (GET /vcons to the end, one tenant, 1000 a page)"},
	{"master-key rotate", "data key rewrapped"},
	{"start-up", "version in the catalog (serve's start to the first 200 of /health)"},
	{"look", "object looked at (serve's look at every object, from /health to its log line; a look cut by the start-up run's stop goes on where it stopped)"},
}

// measure is one measurement at one size.
type measure struct {
	total  time.Duration
	count  int     // what the time is divided by
	rssMiB float64 // peak RSS of the process that did the work; 0 when none
	rssOf  string  // which process, when it did more than this
}

func (m measure) perVersion() float64 {
	return m.total.Seconds() * 1e6 / float64(m.count)
}

// result is every measurement at one size.
type result struct {
	n        int
	load     [2]string // the load average at the start and the end
	build    time.Duration
	measured time.Duration
	m        map[string]measure
}

// TestScale is `make scale`: see the package comment. VCON_SCALE_SIZES
// picks the sizes (default 10000,100000,1000000).
func TestScale(t *testing.T) {
	if os.Getenv("VCON_SCALE") != "1" {
		t.Skip("skipped: run make scale (VCON_SCALE=1, sizes from VCON_SCALE_SIZES)")
	}
	sizes := parseSizes(t, os.Getenv("VCON_SCALE_SIZES"))
	// The tree as the binary is built from it, before anyone changes it.
	run := describeRun()
	bin := testenv.Binary(t)
	var results []result
	for _, n := range sizes {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			results = append(results, runSize(t, bin, n))
		})
	}
	table := report(run, results)
	fmt.Print(table)
	if out := os.Getenv("VCON_SCALE_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// scratchDir is a fresh folder under VCON_SCALE_DIR (the system's
// temporary folder when unset), removed when the size is done.
func scratchDir(t *testing.T) string {
	base := os.Getenv("VCON_SCALE_DIR")
	if base == "" {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp(base, "vcon-scale-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// buildMode is VCON_SCALE_BUILD: buildDirect unless it says buildStore.
func buildMode() string {
	if m := os.Getenv("VCON_SCALE_BUILD"); m != "" {
		return m
	}
	return buildDirect
}

func parseSizes(t *testing.T, s string) []int {
	if strings.TrimSpace(s) == "" {
		return []int{10000, 100000, 1000000}
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(f), "_", ""))
		if err != nil || n < 100 {
			t.Fatalf("VCON_SCALE_SIZES: %q is not a number of versions of at least 100", f)
		}
		out = append(out, n)
	}
	return out
}

// runSize makes a fresh data directory with init, builds n versions and
// runs every measured command as the real binary.
func runSize(t *testing.T, bin string, n int) result {
	s := &site{t: t, bin: bin, dir: scratchDir(t), listen: testenv.FreePort(t)}
	s.config = filepath.Join(s.dir, "vcon-server.toml")
	s.writeConfig(3600)
	s.cli("init")
	s.client = s.httpClient()

	tenants := make([]ids.ID, tenantCount)
	names := make([]string, tenantCount)
	for k := range tenants {
		names[k] = fmt.Sprintf("scale%02d", k)
		var tn struct{ ID string }
		s.jsonOf(s.cli("tenant", "create", names[k]).out, &tn)
		id, err := ids.Parse(tn.ID)
		if err != nil {
			t.Fatal(err)
		}
		tenants[k] = id
		s.cli("tenant", "set-metadata", names[k], "counts")
	}
	var reader, ops struct{ Token string }
	s.jsonOf(s.cli("key", "create", "--tenant", names[0], "--scope", "read", "--label", "scale").out, &reader)
	s.jsonOf(s.cli("key", "create", "--operator", "--label", "scale").out, &ops)

	p := newPlan(n, tenants)
	r := result{n: n, m: map[string]measure{}, load: [2]string{loadAvg(), ""}}
	r.build = build(t, s.dataDir(), s.masterKey(), p, buildMode())
	t.Logf("built %d versions (%d creates, %d replaces) over %d tenants, build mode %s, in %s: %.0f versions/s",
		n, p.creates, p.replaces, tenantCount, buildMode(), r.build.Round(time.Millisecond), float64(n)/r.build.Seconds())
	start := time.Now()
	got := func(name string, m measure) {
		r.m[name] = m
		t.Logf("%-18s %9.1f µs per version (%d in %s), peak RSS %.0f MiB %s",
			name, m.perVersion(), m.count, m.total.Round(time.Millisecond), m.rssMiB, m.rssOf)
	}

	c := s.cli("check")
	// One line per tenant, then the replica's (docs/check-and-recovery.md).
	if lines := strings.Count(string(c.out), "\n"); lines != tenantCount+1 {
		t.Fatalf("check printed %d lines, want one per tenant and the replica's:\n%s", lines, c.out)
	}
	got("check", measure{total: c.wall, count: n, rssMiB: c.rssMiB()})
	c = s.cli("check", "--deep")
	got("check --deep", measure{total: c.wall, count: n, rssMiB: c.rssMiB()})

	exportDir := filepath.Join(s.dir, "export")
	if err := os.Mkdir(exportDir, 0o700); err != nil {
		t.Fatal(err)
	}
	c = s.cli("export", "parquet", "--tenant", names[0], "--to", exportDir)
	var ex struct {
		Rows     int64
		Metadata string
	}
	s.jsonOf(c.out, &ex)
	if ex.Rows != int64(p.kept(0)) || ex.Metadata != "counts" {
		t.Fatalf("export wrote %d rows at level %q, want %d at counts", ex.Rows, ex.Metadata, p.kept(0))
	}
	got("export parquet", measure{total: c.wall, count: int(ex.Rows), rssMiB: c.rssMiB()})
	os.RemoveAll(exportDir)

	// Start-up: serve from the process's start to the first 200 of
	// /health, stopped at once (the look it started goes on next time).
	srv := s.serve("serve-startup")
	health := srv.health
	rss := float64(srv.stop()) / 1024
	got("start-up", measure{total: health, count: n, rssMiB: rss})

	// One more serve: the look at every object to its end, then the
	// listing, then one purge sweep of a tenth of the versions.
	s.writeConfig(int(sweepInterval / time.Second))
	srv = s.serve("serve-sweep")
	lookEnd, lookLine := srv.waitLog(2*time.Hour, "storage look", "done=true")
	looked := field(lookLine, "objects")
	if looked <= 0 {
		t.Fatalf("the look's log line names no objects: %s", lookLine)
	}
	listed, listTime := srv.list(reader.Token)
	if listed != p.current(0) {
		t.Fatalf("GET /vcons listed %d uuids, want %d", listed, p.current(0))
	}
	tenantIDs := make([]string, len(tenants))
	for k, id := range tenants {
		tenantIDs[k] = id.String()
	}
	sweepTime, purged := srv.sweep(ops.Token, tenantIDs, sweepInterval)
	if purged != p.replaces {
		t.Fatalf("the sweep purged %d versions, want %d", purged, p.replaces)
	}
	rss = float64(srv.stop()) / 1024
	const one = "(one serve: look, listing and sweep)"
	got("look", measure{total: lookEnd - srv.health, count: looked, rssMiB: rss, rssOf: one})
	got("listing", measure{total: listTime, count: listed, rssMiB: rss, rssOf: one})
	got("purge sweep", measure{total: sweepTime, count: purged, rssMiB: rss, rssOf: one})

	newKey := filepath.Join(s.dir, "master-2.key")
	if err := seal.CreateMasterKeyFile(newKey); err != nil {
		t.Fatal(err)
	}
	c = s.cli("master-key", "rotate", "--new", newKey)
	var rot struct{ Rotated int }
	s.jsonOf(c.out, &rot)
	if rot.Rotated != n-p.replaces {
		t.Fatalf("rotate rewrapped %d keys, want %d", rot.Rotated, n-p.replaces)
	}
	got("master-key rotate", measure{total: c.wall, count: rot.Rotated, rssMiB: c.rssMiB()})

	r.measured = time.Since(start)
	r.load[1] = loadAvg()
	t.Logf("size %d: build %s, measurements %s, load average %s at the start, %s at the end",
		n, r.build.Round(time.Second), r.measured.Round(time.Second), r.load[0], r.load[1])
	return r
}

// report is the markdown table: a row per size, a column per
// measurement (µs per version and peak RSS), and the ratio of the largest
// size's time per version to that at 10,000 (or the smallest size).
func report(run string, results []result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Scale: time per version and peak RSS\n\n%s; table printed %s\n\n", run, time.Now().UTC().Format(time.RFC3339))
	b.WriteString("| versions |")
	for _, c := range columns {
		fmt.Fprintf(&b, " %s |", c.name)
	}
	b.WriteString("\n| ---: |")
	for range columns {
		b.WriteString(" ---: |")
	}
	b.WriteString("\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s |", thousands(r.n))
		for _, c := range columns {
			m, ok := r.m[c.name]
			if !ok {
				b.WriteString(" — |")
				continue
			}
			fmt.Fprintf(&b, " %s µs · %.0f MiB |", perVersion(m.perVersion()), m.rssMiB)
		}
		b.WriteString("\n")
	}
	if len(results) >= 2 {
		// The largest size against 10,000 when that ran too, else against
		// the smallest.
		last, base := results[len(results)-1], results[0]
		for _, r := range results[:len(results)-1] {
			if r.n == 10000 {
				base = r
			}
		}
		fmt.Fprintf(&b, "| ratio %s / %s |", thousands(last.n), thousands(base.n))
		for _, c := range columns {
			m0, ok0 := base.m[c.name]
			m1, ok1 := last.m[c.name]
			if !ok0 || !ok1 || m0.perVersion() == 0 || m0.rssMiB == 0 {
				b.WriteString(" — |")
				continue
			}
			fmt.Fprintf(&b, " ×%.2f (RSS ×%.1f) |", m1.perVersion()/m0.perVersion(), m1.rssMiB/m0.rssMiB)
		}
		b.WriteString("\n")
	}
	b.WriteString("\nEach cell: microseconds per unit, then the peak RSS (ru_maxrss) of the binary's process. Units:\n\n")
	for _, c := range columns {
		fmt.Fprintf(&b, "- %s: per %s\n", c.name, c.per)
	}
	b.WriteString("- look, listing and purge sweep ran in one serve process, so they share its peak RSS\n")
	b.WriteString("- every time includes the process's own start and the opening of the catalog, which small sizes pay per version\n\n")
	b.WriteString("| versions | load avg | build | measurements | check | check --deep | export | sweep | listing | rotate | start-up | look |\n")
	b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %s → %s | %s | %s |", thousands(r.n), r.load[0], r.load[1], secs(r.build), secs(r.measured))
		for _, name := range []string{"check", "check --deep", "export parquet", "purge sweep", "listing", "master-key rotate", "start-up", "look"} {
			fmt.Fprintf(&b, " %s |", secs(r.m[name].total))
		}
		b.WriteString("\n")
	}
	b.WriteString("\nWall time in seconds (build: putting the versions in; measurements: every command above);\n" +
		"load avg: the machine's 1-minute load average when the size started and ended.\n\n")
	fmt.Fprintf(&b, "Data: %d-byte unsigned vCons over %d tenants at metadata level counts; a tenth of the versions are PUTs\n"+
		"replacing a vCon stored earlier, hidden until the sweep. Every size has its own data directory made by init.\n", vconSize, tenantCount)
	if buildMode() == buildStore {
		fmt.Fprintf(&b, "Built in process through archive.Archive.Store, %d goroutines: sealed, object written and synced\n"+
			"through objstore.Dir, row committed by the catalog's group commit (VCON_SCALE_BUILD=store).\n", storers)
	} else {
		fmt.Fprintf(&b, "Built in process without a sync per object (VCON_SCALE_BUILD=direct, the default; =store goes through\n"+
			"archive.Archive.Store instead): each body inspected (vcon.Inspect), sealed under a new data key (seal.NewWriter),\n"+
			"written as a file at its object key (archive.ObjectKey), the key wrapped by the master key, rows inserted by\n"+
			"catalog.Tx.InsertVersion %d to a transaction, %d goroutines, one sync(2) at the end. The bytes and rows are\n"+
			"those a store makes; only the syncs are batched. The commands then run with the data in the page cache.\n", directBatch, sealers)
	}
	return b.String()
}

// describeRun names the commit, the tree's state, the machine and the
// time the run started.
func describeRun() string {
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	commit := "unknown commit"
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output(); err == nil {
		commit = "commit " + strings.TrimSpace(string(out))
	}
	tree := ""
	if out, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil {
		if n := strings.Count(string(out), "\n"); n > 0 {
			tree = fmt.Sprintf(", working tree with %d uncommitted changed file(s)", n)
		} else {
			tree = ", clean working tree"
		}
	}
	where := os.Getenv("VCON_SCALE_DIR")
	if where == "" {
		where = os.TempDir()
	}
	return fmt.Sprintf("%s%s; %s %s/%s, %d CPUs; data directories under %s (VCON_SCALE_DIR); started %s", commit, tree,
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), where, time.Now().UTC().Format(time.RFC3339))
}

func perVersion(us float64) string {
	switch {
	case us >= 100:
		return strconv.FormatFloat(us, 'f', 0, 64)
	case us >= 10:
		return strconv.FormatFloat(us, 'f', 1, 64)
	default:
		return strconv.FormatFloat(us, 'f', 2, 64)
	}
}

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) }

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/smalldisk"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/reserve"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// reserveSize is the reserve of dir's file system: a twentieth of it, at
// most 16 MiB.
func reserveSize(t *testing.T, dir string) int64 {
	t.Helper()
	n, err := reserve.Size(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func freeBytes(t *testing.T, dir string) uint64 {
	t.Helper()
	free, _, err := reserve.Statfs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return free
}

// TestDiskFull is issue 19's run: a 256 MiB file system with min_free =
// "64MiB". Eight clients store until refused (every refusal a 507 with
// its JSON error and Retry-After); another process fills the disk to its
// last byte; the CLI's set-retention 0d and twenty 0d DELETEs still
// commit, through the reserve; once the filler is gone and the file
// system grown, stores resume without a restart. /health is 503 while
// below the line and 200 after, no acknowledged version is lost, every
// refusal has its audit record, and the log says little about it.
func TestDiskFull(t *testing.T) {
	e := testenv.Prepare(t, testenv.Options{Listen: testenv.FreePort(t), MinFree: "64MiB"})
	data := smalldisk.Move(t, e.Config.DataDir, "256m")
	// Sweeps every second, so that one runs while the disk is full.
	conf, err := os.ReadFile(e.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.ConfigPath, bytes.Replace(conf, []byte("purge_interval = 3600"), []byte("purge_interval = 1"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read", "delete")
	op := e.OperatorKey()
	p := e.StartBinary()
	defer p.Stop()
	if h, want := reserve.Held(data), reserveSize(t, data); h != want {
		t.Fatalf("the reserve holds %d bytes after the start, want %d", h, want)
	}
	health := func() (int, string) {
		r := e.Do("GET", "/health", "", nil)
		return r.Status, string(r.Body)
	}
	if st, body := health(); st != 200 {
		t.Fatalf("/health on an empty disk: %d %s", st, body)
	}

	// Eight clients store 32 KiB vCons until each is refused.
	var mu sync.Mutex
	acked := map[string][]byte{}
	refusals := 0
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < 8; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				u := ids.NewRandom().String()
				body := apitest.NewVcon(u, "full "+strconv.Itoa(i), "+15555550100")
				body = append(body[:len(body)-1], []byte(`,"pad":"`+strings.Repeat("f", 32<<10)+`"}`)...)
				r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon")
				mu.Lock()
				switch r.Status {
				case 201:
					acked[u] = body
					mu.Unlock()
					continue
				case 507:
					refusals++
					mu.Unlock()
				default:
					mu.Unlock()
					t.Errorf("a store answered %d %s, want 201 or 507", r.Status, r.Body)
					return
				}
				checkRefusal(t, r)
				return
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	free := freeBytes(t, data)
	t.Logf("%d stores acknowledged in %s, then refused with 507; %d MiB free", len(acked), time.Since(start).Round(time.Millisecond), free>>20)
	if free >= 64<<20 {
		t.Fatalf("refused with %d bytes free, above min_free", free)
	}
	if st, body := health(); st != 503 || !strings.Contains(body, `"status":"degraded"`) || !strings.Contains(body, "min_free") {
		t.Fatalf("/health below the line: %d %s", st, body)
	}
	metrics := string(e.Do("GET", "/metrics", op.Token, nil).Body)
	for _, want := range []string{"vcon_disk_low 1", "vcon_disk_min_free_bytes 6.7108864e+07", "vcon_disk_free_bytes ", "vcon_disk_reserve_bytes 1.3418496e+07"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// Twenty vCons hidden under 30d: the purge sweep's work once the
	// retention is 0d.
	hidden := 0
	for u, body := range acked {
		if hidden == 20 {
			break
		}
		if body == nil {
			continue
		}
		if r := e.Do("DELETE", "/vcons/"+u, k.Token, nil); r.Status != 204 {
			t.Fatalf("DELETE under 30d: %d %s", r.Status, r.Body)
		}
		acked[u] = nil
		hidden++
	}

	// Another process takes every byte left.
	filler := filepath.Join(data, "filler")
	cmd := exec.Command("sh", "-c", "cat /dev/zero > "+filler)
	cmd.Run() // ends with "No space left on device"
	if free := freeBytes(t, data); free != 0 {
		t.Fatalf("%d bytes free after the filler, want 0", free)
	}
	for i := 0; i < 5; i++ {
		r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(ids.NewRandom().String(), "no room", "+15555550100"), "Content-Type", "application/vcon")
		if r.Status != 507 {
			t.Fatalf("a store on a full disk answered %d %s", r.Status, r.Body)
		}
		checkRefusal(t, r)
		refusals++
	}

	// The operator frees space through the product: the CLI in a process
	// of its own, then DELETEs with retention 0d.
	out, err := exec.Command(testenv.Binary(t), "tenant", "set-retention", "acme", "0d", "--config", e.ConfigPath).CombinedOutput()
	if err != nil {
		t.Fatalf("tenant set-retention acme 0d on a full disk: %v\n%s", err, out)
	}
	// The sweep purges the twenty hidden versions, on the full disk.
	deadline := time.Now().Add(20 * time.Second)
	for swept(t, p.Log) < hidden {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(p.Log)
			t.Fatalf("the sweep purged %d of %d hidden versions on a full disk:\n%s", swept(t, p.Log), hidden, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	deleted := 0
	for u, body := range acked {
		if deleted == 20 {
			break
		}
		if body == nil {
			continue
		}
		if r := e.Do("DELETE", "/vcons/"+u, k.Token, nil); r.Status != 204 {
			t.Fatalf("DELETE %d of 20 on a full disk: %d %s", deleted+1, r.Status, r.Body)
		}
		acked[u] = nil
		deleted++
	}
	// Some write on the full disk was refused and gave the reserve back
	// (which one depends on the room left in the catalog's log; the test
	// in catalog/ makes the CLI's the one).
	if h := reserve.Held(data); h != 0 {
		t.Errorf("the reserve holds %d bytes after the deletes on a full disk, want 0 (released)", h)
	}
	t.Logf("on a full disk: set-retention 0d, a sweep of %d hidden versions and %d 0d DELETEs committed; %d KiB free after", hidden, deleted, freeBytes(t, data)>>10)

	// Room again: the filler gone and the file system grown.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "remount,size=512m", data).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs: %v: %s", err, out)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		u := ids.NewRandom().String()
		body := apitest.NewVcon(u, "room again", "+15555550100")
		r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon")
		if r.Status == 201 {
			acked[u] = body
			break
		}
		if r.Status != 507 || time.Now().After(deadline) {
			t.Fatalf("stores did not resume once the disk had room: %d %s", r.Status, r.Body)
		}
		refusals++
		time.Sleep(200 * time.Millisecond)
	}
	if st, body := health(); st != 200 {
		t.Fatalf("/health with room again: %d %s", st, body)
	}
	deadline = time.Now().Add(10 * time.Second)
	for reserve.Held(data) != reserveSize(t, data) {
		if time.Now().After(deadline) {
			t.Fatalf("the reserve was not made again: it holds %d bytes", reserve.Held(data))
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Nothing acknowledged lost, nothing deleted readable.
	for u, body := range acked {
		r := e.Do("GET", "/vcons/"+u, k.Token, nil)
		if body == nil && r.Status != 404 || body != nil && (r.Status != 200 || !bytes.Equal(r.Body, body)) {
			t.Fatalf("%s reads %d with %d bytes after the run", u, r.Status, len(r.Body))
		}
	}
	p.Stop()

	// Every refusal has its audit record, the ones on the full disk too.
	var recorded int
	sc := bufio.NewScanner(strings.NewReader(e.CLI("audit", "export", "--tenant", "acme")))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec struct{ Status int }
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Status == 507 {
			recorded++
		}
	}
	if recorded != refusals {
		t.Errorf("%d refusals answered 507, %d audit records of them", refusals, recorded)
	}
	log, _ := os.ReadFile(p.Log)
	spaceLines := 0
	var lines []string
	for _, l := range strings.Split(string(log), "\n") {
		if strings.Contains(l, "space") || strings.Contains(l, "disk") || strings.Contains(l, "full") || strings.Contains(l, "min_free") {
			spaceLines++
			lines = append(lines, l)
		}
	}
	t.Logf("%d refusals, all recorded; %d log lines about space:\n%s", refusals, spaceLines, strings.Join(lines, "\n"))
	if spaceLines >= 50 {
		t.Errorf("%d log lines about space, want fewer than 50:\n%s", spaceLines, log)
	}
	if out, errOut, code := e.TryCLI("check"); code != 0 {
		t.Fatalf("check after the run: exit %d\n%s%s", code, out, errOut)
	}
}

// swept is how many versions the purge sweeps logged.
func swept(t *testing.T, log string) int {
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range regexp.MustCompile(`purge sweep purged=(\d+)`).FindAllSubmatch(b, -1) {
		k, _ := strconv.Atoi(string(m[1]))
		n += k
	}
	return n
}

// checkRefusal holds a 507 to its promise: JSON that says the disk is
// low, with no tenant and no amount, and Retry-After.
func checkRefusal(t *testing.T, r testenv.Response) {
	t.Helper()
	var body struct{ Error string }
	if err := json.Unmarshal(r.Body, &body); err != nil || !strings.Contains(body.Error, "disk is low") {
		t.Errorf("a 507's body: %s", r.Body)
	}
	if strings.ContainsAny(body.Error, "0123456789") || strings.Contains(body.Error, "acme") {
		t.Errorf("a 507 names an amount or a tenant: %s", body.Error)
	}
	if n, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || n <= 0 {
		t.Errorf("a 507's Retry-After: %q", r.Header.Get("Retry-After"))
	}
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		t.Errorf("a 507's Content-Type: %q", r.Header.Get("Content-Type"))
	}
}

// TestDiskFilledBetweenMeasures: a store that passed the line but meets a
// disk another process filled since answers 507 too, never 500, keeps
// nothing, and its audit record commits.
func TestDiskFilledBetweenMeasures(t *testing.T) {
	old := reserve.Statfs
	t.Cleanup(func() { reserve.Statfs = old })
	e := testenv.Prepare(t, testenv.Options{})
	data := smalldisk.Move(t, e.Config.DataDir, "64m")
	// The measure says there is room, whatever the file system says.
	reserve.Statfs = func(dir string) (uint64, uint64, error) {
		if dir == data {
			return 1 << 40, 2 << 40, nil
		}
		return old(dir)
	}
	e.Start()
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	if h, want := reserve.Held(data), reserveSize(t, data); h != want {
		t.Fatalf("the reserve holds %d bytes, want %d", h, want)
	}
	filler, err := os.Create(filepath.Join(data, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for _, n := range []int{len(buf), 4096, 1} {
		for {
			if _, err := filler.Write(buf[:n]); err != nil {
				break
			}
		}
	}
	filler.Close()
	u := ids.NewRandom().String()
	body := apitest.NewVcon(u, "unseen", "+15555550100")
	body = append(body[:len(body)-1], []byte(`,"pad":"`+strings.Repeat("u", 64<<10)+`"}`)...)
	r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon")
	if r.Status != 507 {
		t.Fatalf("a store on a disk filled since the last measure: %d %s", r.Status, r.Body)
	}
	checkRefusal(t, r)
	if r := e.Do("GET", "/vcons/"+u, k.Token, nil); r.Status != 404 {
		t.Fatalf("the refused store reads %d", r.Status)
	}
	e.Stop()
	if !strings.Contains(e.CLI("audit", "export", "--tenant", "acme"), `"status":507`) {
		t.Fatal("no audit record of the 507")
	}
}

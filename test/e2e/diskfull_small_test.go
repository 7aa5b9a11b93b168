package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/reserve"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/smalldisk"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestDiskFullSmall is issue 25's run on a small file system: a data
// directory of 16 MiB (and 48 MiB) filled by stores until the disk
// itself refuses them (min_free is 1 KiB), then serve restarted on it.
// It must start, degraded, with /health naming why within 10 s; 0d
// DELETEs answer 204 within 10 s each and free space; stores work again
// after. The reserve is made at the first start, sized to the file
// system, or the journal and /health say why not.
func TestDiskFullSmall(t *testing.T) {
	for _, size := range []string{"16m", "48m"} {
		t.Run(size, func(t *testing.T) { diskFullSmall(t, size) })
	}
}

func diskFullSmall(t *testing.T, size string) {
	e := testenv.Prepare(t, testenv.Options{Listen: testenv.FreePort(t), MinFree: "1KiB", Retention: "0d"})
	data := smalldisk.Move(t, e.Config.DataDir, size)
	k := e.NewKey(e.Tenant("acme"), "write", "read", "delete")
	p := e.StartBinary()
	_, total, err := reserve.Statfs(data)
	if err != nil {
		t.Fatal(err)
	}
	held := reserve.Held(data)
	r := e.Do("GET", "/health", "", nil)
	t.Logf("%s: the reserve holds %d KiB of %d KiB; /health %d %s", size, held>>10, total>>10, r.Status, r.Body)
	if held == 0 {
		log, _ := os.ReadFile(p.Log)
		if !strings.Contains(string(log), "disk reserve cannot be made") || r.Status != 503 || !strings.Contains(string(r.Body), "reserve") {
			t.Fatalf("no reserve on %s and nothing says so: /health %d %s\n%s", size, r.Status, r.Body, log)
		}
	} else if uint64(held) > total/20+4096 || held > 16<<20 {
		t.Fatalf("the reserve holds %d bytes on a file system of %d: more than 5%% of it or 16 MiB", held, total)
	}

	// Stores until the disk refuses them.
	var stored []string
	for i := 0; ; i++ {
		u := ids.NewRandom().String()
		body := apitest.NewVcon(u, "fill "+strconv.Itoa(i), "+15555550100")
		body = append(body[:len(body)-1], []byte(`,"pad":"`+strings.Repeat("f", 32<<10)+`"}`)...)
		r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon")
		if r.Status == 507 {
			checkRefusal(t, r)
			break
		}
		if r.Status != 201 {
			t.Fatalf("store %d answered %d %s", i, r.Status, r.Body)
		}
		stored = append(stored, u)
	}
	t.Logf("%d stores, then 507 with %d KiB free", len(stored), freeBytes(t, data)>>10)
	p.Stop()
	// Stores stop short of the last bytes (diskspace.ReasonFull); another
	// process takes those, so that serve starts on a disk with none.
	smalldisk.Fill(t, data, "filler0")

	// serve starts on the full disk, degraded, and says why.
	start := time.Now()
	p = e.StartBinary()
	defer p.Stop()
	r = e.Do("GET", "/health", "", nil)
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("serve answered /health %s after its start on a full disk, want within 10 s", el)
	}
	if r.Status != 503 || !strings.Contains(string(r.Body), `"status":"degraded"`) {
		t.Fatalf("/health on a full disk: %d %s", r.Status, r.Body)
	}
	t.Logf("restarted on the full disk in %s: /health %d %s", time.Since(start).Round(time.Millisecond), r.Status, r.Body)

	// 0d DELETEs free space on the full disk.
	before := freeBytes(t, data)
	for i, u := range stored[:min(len(stored), 10)] {
		start := time.Now()
		r := e.Do("DELETE", "/vcons/"+u, k.Token, nil)
		if el := time.Since(start); r.Status != 204 || el > 10*time.Second {
			log, _ := os.ReadFile(p.Log)
			t.Fatalf("DELETE %d on the full disk: %d %s after %s, want 204 within 10 s\n%s", i+1, r.Status, r.Body, el, log)
		}
	}
	after := freeBytes(t, data)
	t.Logf("10 DELETEs: %d KiB free before, %d KiB after", before>>10, after>>10)
	if after <= before {
		t.Fatalf("10 DELETEs freed nothing: %d bytes free before, %d after", before, after)
	}
	os.Remove(filepath.Join(data, "filler0"))

	// Stores work again.
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(ids.NewRandom().String(), "room again", "+15555550100"), "Content-Type", "application/vcon")
		if r.Status == 201 {
			break
		}
		if r.Status != 507 || time.Now().After(deadline) {
			t.Fatalf("a store after the deletes: %d %s", r.Status, r.Body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, u := range stored[10:] {
		if r := e.Do("GET", "/vcons/"+u, k.Token, nil); r.Status != 200 {
			t.Fatalf("a stored vCon reads %d after the run", r.Status)
		}
	}
	if size != "16m" {
		return
	}

	// Another process takes every byte: a DELETE takes the reserve and
	// frees. Then it takes those bytes too, the reserve spent: DELETEs
	// answer within seconds, done or saying what they left, and a start
	// on that disk starts or says what to free, at once.
	deadline = time.Now().Add(10 * time.Second)
	for !reserve.Whole(data) {
		if time.Now().After(deadline) {
			t.Fatalf("the reserve was not made again: it holds %d bytes", reserve.Held(data))
		}
		time.Sleep(100 * time.Millisecond)
	}
	smalldisk.Fill(t, data, "filler")
	if r := e.Do("DELETE", "/vcons/"+stored[10], k.Token, nil); r.Status != 204 {
		t.Fatalf("DELETE on a disk another process filled: %d %s", r.Status, r.Body)
	}
	smalldisk.Fill(t, data, "filler2")
	for i, u := range stored[11:21] {
		start := time.Now()
		r := e.Do("DELETE", "/vcons/"+u, k.Token, nil)
		el := time.Since(start)
		if el > 10*time.Second || r.Status != 204 && (r.Status != 503 || !strings.Contains(string(r.Body), "the catalog could not commit") || r.Header.Get("Retry-After") == "") {
			log, _ := os.ReadFile(p.Log)
			t.Fatalf("DELETE %d without a reserve on a full disk: %d %s after %s\n%s", i+1, r.Status, r.Body, el, log)
		}
		if i == 0 {
			t.Logf("a DELETE without a reserve on a full disk: %d %s in %s", r.Status, r.Body, el.Round(time.Millisecond))
		}
	}
	p.Stop()
	startOrRefuse(t, e)
	os.Remove(filepath.Join(data, "filler"))
	os.Remove(filepath.Join(data, "filler2"))
	p = e.StartBinary()
	for _, u := range stored[11:21] {
		if r := e.Do("DELETE", "/vcons/"+u, k.Token, nil); r.Status != 204 && r.Status != 404 {
			t.Fatalf("DELETE once the fillers are gone: %d %s", r.Status, r.Body)
		}
		if r := e.Do("GET", "/vcons/"+u, k.Token, nil); r.Status != 404 {
			t.Fatalf("a deleted vCon reads %d", r.Status)
		}
	}
	p.Stop()
	if out, errOut, code := e.TryCLI("check"); code != 0 {
		t.Fatalf("check after the run: exit %d\n%s%s", code, out, errOut)
	}
}

// startOrRefuse starts serve on a full disk without a reserve: within
// 10 s it answers /health 503, or it has exited saying the disk is full
// and what to free.
func startOrRefuse(t *testing.T, e *testenv.Env) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(testenv.Binary(t), "serve", "--config", e.ConfigPath)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-done
	}()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			done <- nil
			if !strings.Contains(out.String(), "disk is full") || !strings.Contains(out.String(), "free space") {
				t.Fatalf("serve on a full disk without a reserve exited without saying why:\n%s", out.String())
			}
			t.Logf("serve on a full disk without a reserve: %s", strings.TrimSpace(out.String()[strings.LastIndex(strings.TrimSpace(out.String()), "\n")+1:]))
			return
		default:
		}
		if r, err := e.Client.Get(e.BaseURL + "/health"); err == nil {
			r.Body.Close()
			if r.StatusCode != 503 {
				t.Fatalf("/health on a full disk without a reserve: %d", r.StatusCode)
			}
			t.Log("serve started on a full disk without a reserve, degraded")
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("serve on a full disk without a reserve neither answered nor exited in 10 s:\n%s", out.String())
}

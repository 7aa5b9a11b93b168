package replica

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestRestoreRefusesLoss is issue 25's third defect, on the real binary,
// with the vCons in the data directory and the replica in a directory of
// its own:
//
//   - with a segment deleted from the middle of the replica, or the newest
//     one, restore exits 1 naming the missing change and what to do, and
//     leaves no catalog; with the segment back, it restores, and the first
//     start says it carries on the restored generation;
//   - a whole copy of the replica taken before an erasure restores with
//     no word, but restore --at-least N (N the change number check,
//     /metrics and the replica's log line all show after the erasure)
//     refuses it; with --accept-loss it restores, the admin log records
//     the lost changes, and the start destroys the erased vCon's keys
//     again from the tombstones the data directory kept, saying what no
//     tombstone can bring back.
func TestRestoreRefusesLoss(t *testing.T) {
	target := t.TempDir()
	e := testenv.Prepare(t, testenv.Options{Listen: testenv.FreePort(t)})
	e.WriteConfig(replicaTOML(target, 0))
	e.Start()
	k := e.NewKey(e.Tenant("acme"), "write", "read", "delete")
	ops := e.OperatorKey()
	store := func(u string) {
		t.Helper()
		if r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(u, "kept", "+15555550100"), "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("POST: %d %s", r.Status, r.Body)
		}
	}
	gone, kept := ids.NewRandom().String(), ids.NewRandom().String()
	store(gone)
	store(kept)
	e.Stop()
	older := t.TempDir()
	copyTree(t, target, older)

	e.Start()
	if r := e.Do("POST", "/erasures", k.Token, []byte(`{"uuids":["`+gone+`"]}`), "Content-Type", "application/json"); r.Status != 200 {
		t.Fatalf("POST /erasures: %d %s", r.Status, r.Body)
	}
	for range 3 {
		store(ids.NewRandom().String())
	}
	n := replicatedNumbers(t, e, ops.Token)
	e.Stop()
	catalogFile := filepath.Join(e.Config.DataDir, catalog.FileName)
	wipeCatalog(t, e)

	segs := segments(t, target)
	if len(segs) < 3 {
		t.Fatalf("%d segments after the erasure's rollover, want 3: %v", len(segs), segs)
	}
	for _, lost := range []string{segs[1], segs[len(segs)-1]} {
		aside := filepath.Join(t.TempDir(), "seg")
		if err := os.Rename(lost, aside); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := e.TryCLI("restore")
		t.Logf("without %s: %s", filepath.Base(lost), strings.TrimSpace(errOut))
		first := strings.Split(filepath.Base(lost), "-")[1]
		if code == 0 || !strings.Contains(errOut, "lacks the segment that starts at change "+strings.TrimLeft(first, "0")) || !strings.Contains(errOut, "--accept-loss") {
			t.Errorf("restore without %s: exit %d, want a refusal naming it: %s", lost, code, errOut)
		}
		if _, err := os.Stat(catalogFile); !os.IsNotExist(err) {
			t.Fatalf("a refused restore left %s: %v", catalogFile, err)
		}
		if err := os.Rename(aside, lost); err != nil {
			t.Fatal(err)
		}
	}
	out := e.CLI("restore", "--at-least", strconv.FormatInt(n, 10))
	// At n or past it: the start inside replicatedNumbers may add changes
	// of its own before the stop (the look's place, an audit log's
	// checkpoint).
	got := regexp.MustCompile(`"replicated":(\d+)`).FindStringSubmatch(out)
	if got == nil {
		t.Errorf("restore --at-least %d of the whole replica: %s", n, out)
	} else if r, _ := strconv.ParseInt(got[1], 10, 64); r < n {
		t.Errorf("restore --at-least %d of the whole replica restored up to change %d: %s", n, r, out)
	}
	log := e.Log.String()
	e.Start()
	e.WaitLog(len(log), "replica: carrying on the restored generation")
	e.Stop()
	if s := e.Log.String()[len(log):]; strings.Contains(s, "whole generation") {
		t.Errorf("the restore's first start wrote a whole generation:\n%s", s)
	}
	wipeCatalog(t, e)

	// The older copy of the whole replica: nothing in it tells.
	e.WriteConfig(replicaTOML(older, 0))
	_, errOut, code := e.TryCLI("restore", "--at-least", strconv.FormatInt(n, 10))
	t.Logf("the older copy: %s", strings.TrimSpace(errOut))
	if code == 0 || !strings.Contains(errOut, "behind change "+strconv.FormatInt(n, 10)) {
		t.Fatalf("restore --at-least %d of a copy taken before the erasure: exit %d: %s", n, code, errOut)
	}
	_, errOut, code = e.TryCLI("restore", "--at-least", strconv.FormatInt(n, 10), "--accept-loss")
	if code != 0 || !strings.Contains(errOut, "restored without changes") {
		t.Fatalf("restore --accept-loss: exit %d: %s", code, errOut)
	}
	if admin := e.CLI("audit", "export", "--admin"); !regexp.MustCompile(`"action":"catalog_restore_loss","target":"changes \d+ to ` + strconv.FormatInt(n, 10)).MatchString(admin) {
		t.Errorf("the admin log does not record the loss:\n%s", admin)
	}
	if keysOf(t, e, gone) == 0 {
		t.Fatal("the copy's catalog holds no key of the erased vCon: the test proves nothing")
	}
	log = e.Log.String()
	e.Start()
	if r := e.Do("GET", "/vcons/"+gone, k.Token, nil); r.Status == 200 {
		t.Errorf("GET of the erased vCon after the restore: %d", r.Status)
	}
	if r := e.Do("GET", "/vcons/"+kept, k.Token, nil); r.Status != 200 {
		t.Errorf("GET of a kept vCon after the restore: %d", r.Status)
	}
	e.Stop()
	if n := keysOf(t, e, gone); n != 0 {
		t.Errorf("the erased vCon has %d key(s) after the restore's start, though its tombstones survive", n)
	}
	after := e.Log.String()[len(log):]
	for _, want := range []string{"keys_destroyed_again=1", "the restore accepted a loss"} {
		if !strings.Contains(after, want) {
			t.Errorf("the start after the restore does not say %q:\n%s", want, after)
		}
	}
}

// replicatedNumbers reads the replica's change number from /metrics once
// it has caught up (it is copied once a second), from the log line of
// the server's stop, and from check with the server stopped, and fails
// unless they agree.
func replicatedNumbers(t *testing.T, e *testenv.Env, ops string) int64 {
	t.Helper()
	var metric, last int64 = 0, -1
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		// The audit logs' checkpoints are catalog changes too: none may
		// be left to sign between the reads below. A record becomes
		// signable only once replicated, so the background signer can
		// add a change just after a quiet look: wait for two in a row.
		if n, err := e.Daemon.Logs.Sign(t.Context()); err != nil || n > 0 {
			last = -1
			continue
		}
		m := e.Do("GET", "/metrics", ops, nil)
		metric = int64(metricValue(string(m.Body), "vcon_replica_replicated_change"))
		if metric != e.Daemon.Replica.Status().Replicated {
			last = -1
			continue
		}
		if metric == last {
			break
		}
		last = metric
	}
	e.Stop()
	lines := regexp.MustCompile(`replica: every change is in the replica.* replicated=(\d+)`).FindAllStringSubmatch(e.Log.String(), -1)
	if len(lines) == 0 {
		t.Fatal("the stop's replica log line names no replicated change")
	}
	logged, _ := strconv.ParseInt(lines[len(lines)-1][1], 10, 64)
	out, _, _ := e.TryCLI("check")
	c := regexp.MustCompile(`"replicated":(\d+)`).FindStringSubmatch(out)
	if c == nil {
		t.Fatalf("check shows no replicated change:\n%s", out)
	}
	checked, _ := strconv.ParseInt(c[1], 10, 64)
	e.Start()
	t.Logf("the replicated change: check %d, /metrics %d, the log's last %d", checked, metric, logged)
	if metric != checked || logged != checked {
		t.Fatalf("check says %d, /metrics %d, the log %d", checked, metric, logged)
	}
	return checked
}

func segments(t *testing.T, target string) []string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(target, "replica", "g*", "seg-*"))
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
}

// keysOf counts the data keys the catalog holds for a vCon, the server
// stopped.
func keysOf(t *testing.T, e *testenv.Env, uuid string) int {
	t.Helper()
	n := 0
	for _, w := range wrappedKeys(t, e, uuid) {
		if w != nil {
			n++
		}
	}
	return n
}

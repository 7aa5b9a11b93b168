package replica

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/faultproxy"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestReplicaThroughFaults puts the fault proxy between the server and the
// replica's bucket (the vCons stay in the data directory, so every fault
// falls on the replica) under a store load of 8 clients, one of them
// deleting with retention 0d, so rollovers run through the faults too:
//
//   - errors and lost answers the S3 client's retries absorb: every write
//     is acknowledged or refused with a 503, never a 500;
//   - then the bucket answers nothing but 503: writes are refused with a
//     503 that names the replica, with Retry-After, within max_lag plus
//     the wait Admit allows;
//   - then the bucket heals: writes are acknowledged again.
//
// The server is then killed, its catalog deleted and restored from the
// replica: every vCon acknowledged more than max_lag before the kill reads
// back byte for byte, every one whose 0d DELETE answered stays purged, and
// check --deep is clean.
func TestReplicaThroughFaults(t *testing.T) {
	srv := s3test.Start(t, "versitygw")
	for _, lag := range []int{0, 1} {
		t.Run(fmt.Sprintf("max_lag=%d", lag), func(t *testing.T) { replicaThroughFaults(t, srv, lag) })
	}
}

func replicaThroughFaults(t *testing.T, srv *s3test.Server, lag int) {
	proxy, err := faultproxy.Start(srv.Endpoint, srv.CAPEM, faultproxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	t.Logf("fault proxy seed %d", proxy.Seed())
	ca := filepath.Join(t.TempDir(), "proxy-ca.pem")
	if err := proxy.WriteCA(ca); err != nil {
		t.Fatal(err)
	}
	rs3 := replicaS3TOML(t, srv, srv.NewBucket(t, false), "faults/", "")
	rs3 = strings.Replace(rs3, fmt.Sprintf("endpoint = %q", srv.Endpoint), fmt.Sprintf("endpoint = %q", proxy.URL), 1)
	rs3 = strings.Replace(rs3, fmt.Sprintf("ca_file = %q", srv.CAFile), fmt.Sprintf("ca_file = %q", ca), 1)
	if !strings.Contains(rs3, proxy.URL) || !strings.Contains(rs3, ca) {
		t.Fatalf("could not point the replica at the proxy:\n%s", rs3)
	}
	e := testenv.Prepare(t, testenv.Options{Listen: testenv.FreePort(t), Storage: replicaTOML("s3", lag) + rs3})
	k := e.NewKey(e.Tenant("acme"), "write", "read", "delete") // the load hides some (retention 30d)
	purging := e.Tenant("purging")
	e.CLI("tenant", "set-retention", purging, "0d")
	pk := e.NewKey(purging, "write", "read", "delete")
	p := e.StartBinary()
	defer func() {
		if t.Failed() {
			serveLog(t, e)
		}
	}()

	// Errors and lost answers, at rates the retries absorb.
	if err := proxy.SetRules(
		faultproxy.Rule{Fault: faultproxy.Status503, Prob: 0.05},
		faultproxy.Rule{Fault: faultproxy.Status500, Prob: 0.03},
		faultproxy.Rule{Fault: faultproxy.Reset, Prob: 0.03},
		faultproxy.Rule{Fault: faultproxy.DropResponse, Prob: 0.05},
		faultproxy.Rule{Fault: faultproxy.Delay, Prob: 0.03, Delay: 50 * time.Millisecond},
	); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	loaded := make(chan *loadRun, 1)
	go func() { loaded <- storeLoad(t, e, 7, stop, k.Token) }()
	purges := make(chan *purgeRun, 1)
	go func() { purges <- purgeLoad(e, stop, pk.Token) }()
	time.Sleep(4 * time.Second)
	absorbed := proxy.Stats()

	// The bucket down: every request answered 503.
	if err := proxy.SetRules(faultproxy.Rule{Fault: faultproxy.Status503}); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	refusal := probe(t, e, k.Token, 503, 30*time.Second)
	refusedAfter := time.Since(down)
	if !strings.Contains(string(refusal.Body), "replica") || refusal.Header.Get("Retry-After") == "" {
		t.Errorf("the refusal while the replica is behind: %s, Retry-After %q", refusal.Body, refusal.Header.Get("Retry-After"))
	}
	time.Sleep(2 * time.Second)

	// The bucket back.
	proxy.Clear()
	healed := time.Now()
	probe(t, e, k.Token, 201, 60*time.Second)
	acceptedAfter := time.Since(healed)
	time.Sleep(2 * time.Second)
	close(stop)
	run, pr := <-loaded, <-purges
	p.Kill()
	killed := time.Now()
	t.Logf("faults absorbed: %s; with the bucket down the first refusal came after %s; healed, the first acknowledgment after %s",
		absorbed, refusedAfter.Round(time.Millisecond), acceptedAfter.Round(time.Millisecond))
	t.Logf("stores acknowledged %d; purging tenant: %d stored, %d deleted, answers %v", run.acked, len(pr.stored), len(pr.deleted), pr.answers)
	if absorbed.Total() < 10 {
		t.Errorf("only %d faults while the load ran: it proved little", absorbed.Total())
	}
	if max := time.Duration(lag)*time.Second + 10*time.Second; refusedAfter > max {
		t.Errorf("the first 503 came %s after the bucket went down, more than max_lag and Admit's wait (%s)", refusedAfter, max)
	}
	for _, u := range run.unexpected {
		t.Errorf("load: %s", u)
	}
	for _, u := range pr.unexpected {
		t.Errorf("purging load: %s", u)
	}
	if run.acked == 0 || len(pr.deleted) == 0 {
		t.Fatalf("nothing acknowledged (%d stores, %d deletes)", run.acked, len(pr.deleted))
	}

	// Lose the catalog, restore it from the replica, serve.
	for _, f := range []string{"catalog.db", "catalog.db-wal", "catalog.db-shm"} {
		if err := os.Remove(filepath.Join(e.Config.DataDir, f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	if out, errOut, code := e.TryCLI("restore"); code != 0 {
		t.Fatalf("restore: exit %d\n%s%s", code, out, errOut)
	}
	p = e.StartBinary()
	before := killed.Add(-time.Duration(lag) * time.Second)
	required := run.verify(t, e, k.Token, before)
	for u, s := range pr.stored {
		got := e.Do("GET", "/vcons/"+u, pk.Token, nil)
		switch {
		case pr.deleted[u]:
			if got.Status != 404 {
				t.Errorf("%s: its 0d DELETE answered 204, then after the restore it reads %d", u, got.Status)
			}
		case !pr.tried[u] && s.at.Before(before) && (got.Status != 200 || string(got.Body) != string(s.body)):
			t.Errorf("%s: acknowledged, then after the restore reads %d", u, got.Status)
		}
	}
	p.Stop()
	checkDeep(t, e)
	t.Logf("after the restore: %d acknowledged versions found, %d purged vCons stay purged", required, len(pr.deleted))
}

// probe stores a vCon every 100 ms until one is answered with want, and
// returns that answer.
func probe(t *testing.T, e *testenv.Env, token string, want int, within time.Duration) testenv.Response {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		u := ids.NewRandom().String()
		r := e.Do("POST", "/vcons", token, apitest.NewVcon(u, "probe", "+15555550100"), "Content-Type", "application/vcon")
		if r.Status == want {
			return r
		}
		if r.Status != 201 && r.Status != 503 {
			t.Errorf("probe: %d %s", r.Status, r.Body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %d in %s; the last answer: %d %s", want, within, r.Status, r.Body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// purgeRun is what the purging client did: every store acknowledged, and
// every vCon whose 0d DELETE answered 204.
type purgeRun struct {
	stored     map[string]*sent
	deleted    map[string]bool
	tried      map[string]bool // a DELETE was sent
	answers    map[string]int  // "POST 201", "DELETE 503", ...
	unexpected []string
}

// purgeLoad stores a vCon and deletes every second one (retention 0d:
// the DELETE purges, its rollover included, before it answers), until
// stop is closed. 503 is a refusal as promised; anything else but 201 and
// 204 is unexpected.
func purgeLoad(e *testenv.Env, stop <-chan struct{}, token string) *purgeRun {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-stop; cancel() }()
	defer cancel()
	client := e.HTTPClient()
	run := &purgeRun{stored: map[string]*sent{}, deleted: map[string]bool{}, tried: map[string]bool{}, answers: map[string]int{}}
	var mu sync.Mutex
	note := func(method string, status int, body []byte) {
		mu.Lock()
		defer mu.Unlock()
		run.answers[fmt.Sprintf("%s %d", method, status)]++
		if status != 201 && status != 204 && status != 503 {
			run.unexpected = append(run.unexpected, fmt.Sprintf("%s: %d %s", method, status, body))
		}
	}
	for n := 0; ctx.Err() == nil; n++ {
		u := ids.NewRandom().String()
		s := &sent{body: apitest.NewVcon(u, fmt.Sprintf("purged %d", n), "+15555550199")}
		status, body, err := do(ctx, client, "POST", e.BaseURL+"/vcons", token, s.body)
		if err != nil {
			continue
		}
		note("POST", status, body)
		if status != 201 {
			continue
		}
		s.acked, s.at = true, time.Now()
		run.stored[u] = s
		if n%2 == 1 {
			continue
		}
		run.tried[u] = true
		status, body, err = do(ctx, client, "DELETE", e.BaseURL+"/vcons/"+u, token, nil)
		if err != nil {
			continue
		}
		note("DELETE", status, body)
		if status == 204 {
			run.deleted[u] = true
		}
	}
	return run
}

// TestDeleteWhileReplicaDown: a 0d DELETE whose rollover cannot reach the
// replica's target (here a directory replaced by a file) answers 503 with
// Retry-After, saying the vCon is unreadable and its purge waits for the
// replica, not 500; once the target is back, the next start finishes the
// purge and check finds nothing wrong.
func TestDeleteWhileReplicaDown(t *testing.T) {
	target := filepath.Join(t.TempDir(), "replica")
	e := testenv.New(t, testenv.Options{Retention: "0d", Storage: replicaTOML(target, 0)})
	k := e.NewKey(e.Tenant("acme"), "write", "read", "delete")
	var uuids []string
	for range 2 {
		u := ids.NewRandom().String()
		if r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(u, "kept", "+15555550100"), "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("POST: %d %s", r.Status, r.Body)
		}
		uuids = append(uuids, u)
	}
	if err := os.Rename(target, target+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, []byte("not a directory\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.Do("DELETE", "/vcons/"+uuids[0], k.Token, nil)
	var got struct{ Error string }
	r.JSON(t, &got)
	const want = "the vCon is deleted and can no longer be read, but the catalog's replica is behind and may still hold its keys; the purge sweep finishes the purge once the replica answers, retry later"
	if r.Status != 503 || got.Error != want || r.Header.Get("Retry-After") == "" {
		t.Fatalf("DELETE with the replica down: %d %q, Retry-After %q; want 503 %q", r.Status, got.Error, r.Header.Get("Retry-After"), want)
	}
	if r := e.Do("GET", "/vcons/"+uuids[0], k.Token, nil); r.Status != 404 {
		t.Fatalf("the deleted vCon reads %d", r.Status)
	}
	e.Stop()
	if err := os.Remove(target); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(target+".away", target); err != nil {
		t.Fatal(err)
	}
	e.Start()
	if r := e.Do("GET", "/vcons/"+uuids[1], k.Token, nil); r.Status != 200 {
		t.Fatalf("the other vCon reads %d", r.Status)
	}
	e.Stop()
	checkDeep(t, e)
}

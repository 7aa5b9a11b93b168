package reliability

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/smalldisk"

	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/reserve"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/faultproxy"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// crashReserve kills the server just after a write on a full disk gave
// the reserve back: a 0d DELETE on a data directory another process
// filled. The next start, with room again, must have lost nothing, make
// the reserve again, and leave check --deep nothing to say.
func crashReserve(t *testing.T, c *crashEnv, point string) {
	e := binaryEnv(t, c, false, "", testenv.Options{Retention: "0d", MinFree: "16MiB"})
	data := smalldisk.Move(t, e.Config.DataDir, "128m")
	k := e.NewKey(e.Tenant("acme"), "write", "read", "delete")
	a := acked{}
	p := e.StartBinary()
	storeSome(t, e, k.Token, 4, a)
	p.Stop()
	size, err := reserve.Size(data)
	if err != nil {
		t.Fatal(err)
	}
	if reserve.Held(data) != size {
		t.Fatalf("no reserve after a start with room: %d bytes", reserve.Held(data))
	}
	var victim string
	for u := range a {
		victim = u
		break
	}
	body := a[victim]
	delete(a, victim)
	p = e.StartBinary(crashpoint.EnvVar + "=" + point)
	smalldisk.Fill(t, data, "filler")
	sendUntilDeath(t, e, p, point, "DELETE", "/vcons/"+victim, k.Token, nil)
	if h := reserve.Held(data); h != 0 {
		t.Fatalf("killed at %s with the reserve holding %d bytes", point, h)
	}
	if err := os.Remove(filepath.Join(data, "filler")); err != nil {
		t.Fatal(err)
	}
	recoverAndCheck(t, e, k.Token, a)
	if h := reserve.Held(data); h != size {
		t.Fatalf("the start after the kill did not make the reserve again: %d bytes", h)
	}
	// The cut DELETE committed nothing, or all of it.
	p = e.StartBinary()
	got := e.Do("GET", "/vcons/"+victim, k.Token, nil)
	p.Stop()
	if !(got.Status == 404 || got.Status == 200 && string(got.Body) == string(body)) {
		t.Fatalf("the vCon whose DELETE was cut reads %d with %d bytes", got.Status, len(got.Body))
	}
}

// TestBucketQuota: a bucket that refuses an object for its quota answers
// the store 507, as a full disk does, with Retry-After and nothing kept;
// once the bucket takes objects again, so does the server.
func TestBucketQuota(t *testing.T) {
	p := startProxied(t)
	e := testenv.New(t, testenv.Options{Storage: p.storageTOML(t, p.srv.NewBucket(t, false), "quota/")})
	k := e.NewKey(e.Tenant("acme"), "write", "read")
	if err := p.proxy.SetRules(faultproxy.Rule{Method: "PUT", Path: "/objects/", Fault: faultproxy.Quota}); err != nil {
		t.Fatal(err)
	}
	u := ids.NewRandom().String()
	body := apitest.NewVcon(u, "quota", "+15555550100")
	r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon")
	if r.Status != 507 || r.Header.Get("Retry-After") == "" || !strings.Contains(string(r.Body), "disk is low") {
		t.Fatalf("a store the bucket's quota refused: %d %s (Retry-After %q)", r.Status, r.Body, r.Header.Get("Retry-After"))
	}
	if st := p.proxy.Stats(); st.Faults[faultproxy.Quota] != 1 {
		t.Fatalf("the quota refusal was sent again: %s", st)
	}
	if r := e.Do("GET", "/vcons/"+u, k.Token, nil); r.Status != 404 {
		t.Fatalf("a refused store reads %d", r.Status)
	}
	if err := p.proxy.SetRules(); err != nil {
		t.Fatal(err)
	}
	if r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon"); r.Status != 201 {
		t.Fatalf("a store once the bucket has room: %d %s", r.Status, r.Body)
	}
}

// TestHealthStoreUnreachable: /health is degraded while the bucket does
// not answer, and ok again once it does.
func TestHealthStoreUnreachable(t *testing.T) {
	p := startProxied(t)
	e := testenv.New(t, testenv.Options{Storage: p.storageTOML(t, p.srv.NewBucket(t, false), "health/")})
	if r := e.Do("GET", "/health", "", nil); r.Status != 200 {
		t.Fatalf("/health with the bucket answering: %d %s", r.Status, r.Body)
	}
	if err := p.proxy.SetRules(faultproxy.Rule{Fault: faultproxy.Reset}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(11 * time.Second) // past the probe's interval
	r := e.Do("GET", "/health", "", nil)
	if r.Status != 503 || strings.TrimSpace(string(r.Body)) != `{"status":"degraded","reasons":["the object store cannot be reached"]}` {
		t.Fatalf("/health with the bucket unreachable: %d %s", r.Status, r.Body)
	}
	if err := p.proxy.SetRules(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(11 * time.Second)
	if r := e.Do("GET", "/health", "", nil); r.Status != 200 {
		t.Fatalf("/health with the bucket answering again: %d %s", r.Status, r.Body)
	}
	log := e.Log.String()
	if strings.Count(log, "object store cannot be reached") != 1 || strings.Count(log, "object store answers again") != 1 {
		t.Fatalf("want one WARN each way:\n%s", log)
	}
}

// TestHealthReplicaBehind: /health is degraded while the catalog's
// replica is behind more than max_lag, and ok again once it caught up.
func TestHealthReplicaBehind(t *testing.T) {
	p := startProxied(t)
	e := testenv.New(t, testenv.Options{Storage: p.storageTOML(t, p.srv.NewBucket(t, false), "lag/") + "\n[replica]\nto = \"s3\"\nmax_lag = 1\n"})
	k := e.NewKey(e.Tenant("acme"), "write")
	if r := e.Do("GET", "/health", "", nil); r.Status != 200 {
		t.Fatalf("/health with the replica keeping up: %d %s", r.Status, r.Body)
	}
	if err := p.proxy.SetRules(faultproxy.Rule{Method: "PUT", Path: "/replica/", Fault: faultproxy.Reset}); err != nil {
		t.Fatal(err)
	}
	e.Do("POST", "/vcons", k.Token, apitest.NewVcon(ids.NewRandom().String(), "lag", "+15555550100"), "Content-Type", "application/vcon")
	want := `{"status":"degraded","reasons":["the catalog's replica is behind more than max_lag"]}`
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := e.Do("GET", "/health", "", nil)
		if r.Status == 503 && strings.TrimSpace(string(r.Body)) == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/health with the replica's uploads refused: %d %s", r.Status, r.Body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := p.proxy.SetRules(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		r := e.Do("GET", "/health", "", nil)
		if r.Status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/health once the replica can upload again: %d %s", r.Status, r.Body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

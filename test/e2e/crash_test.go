package e2e

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

func countFiles(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// TestKillWhileStoring kills the server with SIGKILL while 16 clients store
// vCons; after a restart every vCon that got a 201 reads back
// byte-identical, and recovery left no object without a version.
func TestKillWhileStoring(t *testing.T) {
	e := testenv.Prepare(t, testenv.Options{Listen: testenv.FreePort(t)})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	p := e.StartBinary()

	var mu sync.Mutex
	acked := map[string][]byte{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			client := e.HTTPClient()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				u := ids.NewRandom().String()
				body := apitest.NewVcon(u, "crash", "+15555550100")
				body = append(body[:len(body)-1], []byte(`,"pad":"`+string(bytes.Repeat([]byte("x"), 4000))+`"}`)...)
				req, _ := http.NewRequest("POST", e.BaseURL+"/vcons", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+k.Token)
				req.Header.Set("Content-Type", "application/vcon")
				resp, err := client.Do(req)
				if err != nil {
					continue // the server is gone: this one was never acknowledged
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 201 {
					mu.Lock()
					acked[u] = body
					mu.Unlock()
				}
			}
		}(w)
	}
	time.Sleep(1500 * time.Millisecond)
	p.Kill()
	close(stop)
	wg.Wait()
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	if n < 10 {
		t.Fatalf("only %d stores acknowledged before the kill", n)
	}

	p = startAndLook(t, e)
	for u, body := range acked {
		got := e.Do("GET", "/vcons/"+u, k.Token, nil)
		if got.Status != 200 || !bytes.Equal(got.Body, body) {
			t.Fatalf("%s: acknowledged, then read back status %d, %d bytes", u, got.Status, len(got.Body))
		}
	}
	p.Stop()
	objects := countFiles(filepath.Join(e.Config.DataDir, "objects"))
	var versions int
	cat := openCatalog(t, e)
	cat.DB().QueryRow(`SELECT count(*) FROM versions`).Scan(&versions)
	cat.Close()
	if objects != versions {
		t.Fatalf("%d objects but %d versions after recovery", objects, versions)
	}
	t.Logf("%d stores acknowledged before SIGKILL; all read back after restart; %d objects = %d versions", n, objects, versions)
}

// TestCrashPoints kills the server at each named point of a store and of a
// purge, restarts it, and checks what the next start repaired.
func TestCrashPoints(t *testing.T) {
	for _, point := range []string{crashpoint.StoreAfterObject, crashpoint.StoreAfterCommit} {
		t.Run(point, func(t *testing.T) {
			e := testenv.Prepare(t, testenv.Options{Listen: testenv.FreePort(t)})
			k := e.NewKey(e.Tenant("acme"), "write", "read")
			a := ids.NewRandom().String()
			b := ids.NewRandom().String()
			bodyA := apitest.NewVcon(a, "kept", "+15555550100")
			bodyB := apitest.NewVcon(b, "cut", "+15555550100")
			p := e.StartBinary()
			if r := e.Do("POST", "/vcons", k.Token, bodyA, "Content-Type", "application/vcon"); r.Status != 201 {
				t.Fatalf("POST A: %d", r.Status)
			}
			p.Stop()
			p = e.StartBinary(crashpoint.EnvVar + "=" + point)
			req, _ := http.NewRequest("POST", e.BaseURL+"/vcons", bytes.NewReader(bodyB))
			req.Header.Set("Authorization", "Bearer "+k.Token)
			req.Header.Set("Content-Type", "application/vcon")
			if resp, err := e.Client.Do(req); err == nil {
				resp.Body.Close()
				t.Fatalf("the server answered %d instead of dying at %s", resp.StatusCode, point)
			}
			p.Wait()
			p = startAndLook(t, e)
			if got := e.Do("GET", "/vcons/"+a, k.Token, nil); !bytes.Equal(got.Body, bodyA) {
				t.Fatalf("A lost: %d", got.Status)
			}
			gotB := e.Do("GET", "/vcons/"+b, k.Token, nil)
			switch point {
			case crashpoint.StoreAfterObject:
				if gotB.Status != 404 {
					t.Fatalf("B was never committed but reads %d", gotB.Status)
				}
			case crashpoint.StoreAfterCommit:
				if !bytes.Equal(gotB.Body, bodyB) {
					t.Fatalf("B was committed but reads %d", gotB.Status)
				}
			}
			p.Stop()
			assertObjectsMatchVersions(t, e)
		})
	}
	for _, point := range []string{crashpoint.PurgeAfterKey, crashpoint.PurgeAfterCount, crashpoint.PurgeAfterTombstone, crashpoint.PurgeAfterDelete} {
		t.Run(point, func(t *testing.T) {
			e := testenv.Prepare(t, testenv.Options{Listen: testenv.FreePort(t), Retention: "0d"})
			k := e.NewKey(e.Tenant("acme"), "write", "read", "delete")
			a := ids.NewRandom().String()
			b := ids.NewRandom().String()
			bodyA := apitest.NewVcon(a, "kept", "+15555550100")
			p := e.StartBinary()
			for _, u := range []string{a, b} {
				if r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(u, "x", "+15555550100"), "Content-Type", "application/vcon"); r.Status != 201 {
					t.Fatalf("POST: %d", r.Status)
				}
			}
			bodyA = e.Do("GET", "/vcons/"+a, k.Token, nil).Body
			p.Stop()
			p = e.StartBinary(crashpoint.EnvVar + "=" + point)
			req, _ := http.NewRequest("DELETE", e.BaseURL+"/vcons/"+b, nil)
			req.Header.Set("Authorization", "Bearer "+k.Token)
			if resp, err := e.Client.Do(req); err == nil {
				resp.Body.Close()
				t.Fatalf("the server answered %d instead of dying at %s", resp.StatusCode, point)
			}
			p.Wait()
			p = startAndLook(t, e)
			if got := e.Do("GET", "/vcons/"+a, k.Token, nil); !bytes.Equal(got.Body, bodyA) {
				t.Fatalf("A lost: %d", got.Status)
			}
			if got := e.Do("GET", "/vcons/"+b, k.Token, nil); got.Status != 404 {
				t.Fatalf("B reads %d after its purge was cut", got.Status)
			}
			if got := e.Do("GET", "/vcons/"+b+"/versions", k.Token, nil); got.Status != 404 {
				t.Fatalf("B's versions answer %d after recovery", got.Status)
			}
			p.Stop()
			cat := openCatalog(t, e)
			var purging, keys int
			cat.DB().QueryRow(`SELECT count(*) FROM versions WHERE purge <> 0`).Scan(&purging)
			cat.DB().QueryRow(`SELECT count(*) FROM versions WHERE wrapped_key IS NOT NULL`).Scan(&keys)
			cat.Close()
			if purging != 0 || keys != 1 {
				t.Fatalf("after recovery: %d purges unfinished, %d keys (want 0, 1)", purging, keys)
			}
			assertObjectsMatchVersions(t, e)
		})
	}
}

// startAndLook starts the binary and waits until the look at every object
// that follows its start finished a pass: the orphans a kill left are
// removed after /health answers, not before.
func startAndLook(t *testing.T, e *testenv.Env) *testenv.Proc {
	t.Helper()
	const done = "vcon_server::serve: storage look "
	before := 0
	if b, err := os.ReadFile(filepath.Join(e.Dir, "serve.log")); err == nil {
		before = countLooks(string(b))
	}
	p := e.StartBinary()
	deadline := time.Now().Add(time.Minute)
	for {
		b, _ := os.ReadFile(p.Log)
		if countLooks(string(b)) > before {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("no finished %q in the log in a minute:\n%s", done, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// countLooks counts the passes of the storage look a serve log reports
// finished.
func countLooks(log string) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "vcon_server::serve: storage look ") && strings.Contains(line, " done=true") {
			n++
		}
	}
	return n
}

func assertObjectsMatchVersions(t *testing.T, e *testenv.Env) {
	t.Helper()
	cat := openCatalog(t, e)
	defer cat.Close()
	var versions int
	cat.DB().QueryRow(`SELECT count(*) FROM versions`).Scan(&versions)
	if objects := countFiles(filepath.Join(e.Config.DataDir, "objects")); objects != versions {
		t.Fatalf("%d objects, %d versions", objects, versions)
	}
}

package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/kmstest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// withKeyCache is the TOML of a's [kms] with kms.key_cache set.
func withKeyCache(a *kmstest.AWS, seconds int) string {
	return strings.Replace(a.TOML(), "provider = \"awskms\"\n", fmt.Sprintf("provider = \"awskms\"\nkey_cache = %d\n", seconds), 1)
}

// storeMany stores n vCons of one tenant and returns their bodies by uuid.
func storeMany(t *testing.T, e *testenv.Env, token string, n int) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for i := range n {
		u := ids.NewRandom().String()
		body := apitest.NewVcon(u, fmt.Sprintf("drill %d", i), "+15555550100")
		if r := e.Do("POST", "/vcons", token, body, "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("store: %d %s", r.Status, r.Body)
		}
		out[u] = body
	}
	return out
}

func readsBack(t *testing.T, e *testenv.Env, token string, bodies map[string][]byte) {
	t.Helper()
	for u, body := range bodies {
		if r := e.Do("GET", "/vcons/"+u, token, nil); r.Status != 200 || !bytes.Equal(r.Body, body) {
			t.Errorf("%s reads %d with %d bytes, want its %d", u, r.Status, len(r.Body), len(body))
		}
	}
}

// TestRevocationDrill is the drill: two tenants, one whose key is
// wrapped by a KMS key of its own. Revoked in the KMS, that tenant's
// requests fail within key_cache with 403 naming its key, while 8 clients
// of the other tenant see no error; granted again, the first request
// works and every version reads back byte for byte; the KMS out of reach,
// its requests answer 503 with Retry-After.
func TestRevocationDrill(t *testing.T) {
	a := kmstest.StartLocalKMS(t)
	e := testenv.Prepare(t, testenv.Options{Storage: withKeyCache(a, 1)})
	e.Start()
	own, other := e.Tenant("own"), e.Tenant("other")
	kOwn, kOther := e.NewKey(own, "write", "read"), e.NewKey(other, "write", "read")
	ownBodies := storeMany(t, e, kOwn.Token, 10)
	tenantKey := a.CreateKey(t)
	if out := e.CLI("tenant", "set-key", "own", "--kms-key", tenantKey); !strings.Contains(out, `"state":"opens"`) || !strings.Contains(out, `"wrapped_by":"kms"`) {
		t.Fatalf("tenant set-key: %s", out)
	}
	ownBodies = mergeBodies(ownBodies, storeMany(t, e, kOwn.Token, 5))
	otherBodies := storeMany(t, e, kOther.Token, 10)
	readsBack(t, e, kOwn.Token, ownBodies)

	// The other tenant's load: 8 clients storing and reading.
	var stop atomic.Bool
	var errs, done atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr string
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				u := ids.NewRandom().String()
				body := apitest.NewVcon(u, fmt.Sprintf("load %d %d", c, i), "+15555550101")
				st, msg := send(e, "POST", "/vcons", kOther.Token, body)
				if st == 201 {
					st, msg = send(e, "GET", "/vcons/"+u, kOther.Token, nil)
				}
				if st != 200 {
					errs.Add(1)
					mu.Lock()
					if firstErr == "" {
						firstErr = fmt.Sprintf("%d %s", st, msg)
					}
					mu.Unlock()
				}
				done.Add(1)
			}
		}()
	}

	some := firstOf(ownBodies)
	a.Disable(t, tenantKey)
	revoked := time.Now()
	r := waitStatus(t, e, "/vcons/"+some, kOwn.Token, 403, 10*time.Second)
	took := time.Since(revoked)
	t.Logf("revoked: the tenant's reads refused after %v (key_cache 1 s)", took)
	if took > 3*time.Second {
		t.Errorf("the revoked tenant was refused only after %v, key_cache is 1 s", took)
	}
	if !strings.Contains(string(r.Body), tenantKey) || !strings.Contains(string(r.Body), "refused") {
		t.Errorf("the 403 does not name the tenant's key: %s", r.Body)
	}
	u := ids.NewRandom().String()
	if st, msg := send(e, "POST", "/vcons", kOwn.Token, apitest.NewVcon(u, "revoked", "+15555550100")); st != 403 {
		t.Errorf("a store of the revoked tenant: %d %s", st, msg)
	}
	if out := e.CLI("tenant", "show", "own"); !strings.Contains(out, `"state":"refused"`) {
		t.Errorf("tenant show while revoked: %s", out)
	}
	ops := e.OperatorKey("metrics")
	if m := e.Do("GET", "/metrics", ops.Token, nil); !strings.Contains(string(m.Body), "vcon_tenant_keys_failing 1") {
		t.Errorf("/metrics while revoked does not count the tenant:\n%s", grepLines(m.Body, "vcon_tenant_keys"))
	}
	if strings.Contains(e.Log.String(), own) || strings.Contains(e.Log.String(), tenantKey) {
		t.Error("the server's log names the revoked tenant or its key")
	}

	a.Enable(t, tenantKey)
	if st, msg := send(e, "GET", "/vcons/"+some, kOwn.Token, nil); st != 200 {
		t.Errorf("the first read once the key is granted again: %d %s", st, msg)
	}
	readsBack(t, e, kOwn.Token, ownBodies)

	// The KMS out of reach: 503 with Retry-After, once the cache ends.
	a.Stop(t)
	r = waitStatus(t, e, "/vcons/"+some, kOwn.Token, 503, 10*time.Second)
	if r.Header.Get("Retry-After") == "" || !strings.Contains(string(r.Body), "cannot be reached") {
		t.Errorf("a read while the KMS is out of reach: %d %q %s", r.Status, r.Header.Get("Retry-After"), r.Body)
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("the other tenant's 8 clients made %d requests, %d failed", done.Load(), errs.Load())
	if errs.Load() != 0 || done.Load() == 0 {
		t.Errorf("the other tenant saw %d errors in %d requests: %s", errs.Load(), done.Load(), firstErr)
	}
	readsBack(t, e, kOther.Token, otherBodies)
}

func mergeBodies(a, b map[string][]byte) map[string][]byte {
	for k, v := range b {
		a[k] = v
	}
	return a
}

func firstOf(m map[string][]byte) string {
	for k := range m {
		return k
	}
	return ""
}

// send is Env.Do for other goroutines: it never fails the test.
func send(e *testenv.Env, method, path, token string, body []byte) (int, string) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, e.BaseURL+path, rd)
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/vcon")
	}
	resp, err := e.Client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func waitStatus(t *testing.T, e *testenv.Env, path, token string, want int, within time.Duration) testenv.Response {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := e.Do("GET", path, token, nil)
		if r.Status == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s answers %d %s, not %d, after %v", path, r.Status, r.Body, want, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func grepLines(b []byte, s string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestDeletedTenantGoneFromCopies: under kms.tenant_keys = "kms", tenant
// create has the key service make the tenant's key, and tenant delete
// schedules that key's deletion: a copy of the whole host (configuration,
// master key file, data directory with its catalog and objects) taken
// before the delete then opens none of the tenant's versions, while the
// other tenant's read as before.
func TestDeletedTenantGoneFromCopies(t *testing.T) {
	a := kmstest.StartLocalKMS(t)
	toml := strings.Replace(a.TOML(), "provider = \"awskms\"\n", "provider = \"awskms\"\ntenant_keys = \"kms\"\n", 1)
	e := testenv.Prepare(t, testenv.Options{Storage: toml})
	e.Start()
	gone, kept := e.Tenant("gone"), e.Tenant("kept")
	show := e.CLI("tenant", "show", "gone")
	if !strings.Contains(show, `"wrapped_by":"kms"`) || !strings.Contains(show, `"state":"opens"`) {
		t.Fatalf("a tenant made under tenant_keys = \"kms\": %s", show)
	}
	kGone, kKept := e.NewKey(gone, "write", "read"), e.NewKey(kept, "write", "read")
	goneBodies, keptBodies := storeMany(t, e, kGone.Token, 3), storeMany(t, e, kKept.Token, 3)
	e.Stop()

	before := copyHost(t, e)
	out, errOut, code := e.TryCLI("tenant", "delete", "gone", "--confirm", "gone")
	if code != 0 || !strings.Contains(out, `"receipt"`) {
		t.Fatalf("tenant delete: %d %s %s", code, out, errOut)
	}
	e.Start()
	readsBack(t, e, kKept.Token, keptBodies)
	e.Stop()

	// The copy still holds the tenant's rows, objects and wrapped key, but
	// the key service no longer unwraps it.
	before.Start()
	for u := range goneBodies {
		r := before.Do("GET", "/vcons/"+u, kGone.Token, nil)
		if r.Status != 403 || !strings.Contains(string(r.Body), "refused") {
			t.Errorf("the copy taken before the delete reads %s: %d %s", u, r.Status, r.Body)
		}
	}
	readsBack(t, before, kKept.Token, keptBodies)
}

// TestTenantKeyOnItsOwnService: a tenant whose own key lives with other
// credentials (another account's key service) is reached through its
// [kms.tenant.NAME] table. Its key opens there, its revocation there
// refuses it alone, and its delete schedules that key's deletion there.
func TestTenantKeyOnItsOwnService(t *testing.T) {
	ours, theirs := kmstest.StartLocalKMS(t), kmstest.StartLocalKMS(t)
	table := fmt.Sprintf(`
[kms.tenant.acme]
provider = "awskms"

[kms.tenant.acme.awskms]
region = %q
endpoint = %q
access_key_id = %q
secret_access_key_file = %q
ca_file = %q
`, theirs.Region, theirs.Endpoint, theirs.AccessKeyID, theirs.SecretFile, theirs.CAFile)
	e := testenv.Prepare(t, testenv.Options{Storage: withKeyCache(ours, 1) + table})
	e.Start()
	acme, other := e.Tenant("acme"), e.Tenant("other")
	kAcme, kOther := e.NewKey(acme, "write", "read"), e.NewKey(other, "write", "read")
	acmeKey := theirs.CreateKey(t)
	if _, errOut, code := e.TryCLI("tenant", "set-key", "acme", "--kms-key", ours.CreateKey(t)); code == 0 {
		t.Fatal("a key of [kms]'s own service was taken for a tenant with a service of its own")
	} else {
		t.Logf("a key of the other service: %s", strings.TrimSpace(errOut))
	}
	if out := e.CLI("tenant", "set-key", "acme", "--kms-key", acmeKey); !strings.Contains(out, `"state":"opens"`) {
		t.Fatalf("tenant set-key on the tenant's own service: %s", out)
	}
	acmeBodies, otherBodies := storeMany(t, e, kAcme.Token, 3), storeMany(t, e, kOther.Token, 3)

	theirs.Disable(t, acmeKey)
	waitStatus(t, e, "/vcons/"+firstOf(acmeBodies), kAcme.Token, 403, 10*time.Second)
	readsBack(t, e, kOther.Token, otherBodies)
	theirs.Enable(t, acmeKey)
	waitStatus(t, e, "/vcons/"+firstOf(acmeBodies), kAcme.Token, 200, 10*time.Second)
	e.Stop()

	before := copyHost(t, e)
	if out, errOut, code := e.TryCLI("tenant", "delete", "acme", "--confirm", "acme"); code != 0 || !strings.Contains(out, `"receipt"`) {
		t.Fatalf("tenant delete: %d %s %s", code, out, errOut)
	}
	before.Start()
	if r := before.Do("GET", "/vcons/"+firstOf(acmeBodies), kAcme.Token, nil); r.Status != 403 {
		t.Errorf("a copy taken before the delete reads the tenant's vCon: %d %s", r.Status, r.Body)
	}
	readsBack(t, before, kOther.Token, otherBodies)
}

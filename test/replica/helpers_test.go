package replica

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// replicaTOML is a [replica] into the storage bucket (to = "s3") or a
// directory.
func replicaTOML(to string, maxLag int) string {
	return fmt.Sprintf("\n[replica]\nto = %q\nmax_lag = %d\n", to, maxLag)
}

// parquetTOML packs every second, so that pack runs move versions while
// the load stores them.
const parquetTOML = "\n[storage.parquet]\npack_interval = 1\n"

// replicaS3TOML is a [replica.s3] table naming bucket on srv, with extra
// lines at its end.
func replicaS3TOML(t testing.TB, srv *s3test.Server, bucket, prefix, extra string) string {
	t.Helper()
	secret := filepath.Join(t.TempDir(), "replica.secret")
	if err := os.WriteFile(secret, []byte(srv.SecretKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`
[replica.s3]
endpoint = %q
region = %q
bucket = %q
prefix = %q
path_style = true
access_key_id = %q
secret_access_key_file = %q
ca_file = %q
%s
`, srv.Endpoint, srv.Region, bucket, prefix, srv.AccessKey, secret, srv.CAFile, extra)
}

// bucketStore opens bucket on srv under prefix as a second client would.
func bucketStore(t testing.TB, srv *s3test.Server, bucket, prefix string) objstore.Store {
	t.Helper()
	return objstore.NewS3(srv.Client(t), bucket, prefix, t.TempDir())
}

// keys lists the keys of s under prefix.
func keys(t testing.TB, s objstore.Store, prefix string) []string {
	t.Helper()
	var out []string
	if err := s.List(context.Background(), prefix, func(i objstore.Info) error { out = append(out, i.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// sent is one request of the load: what it stored (or a DELETE) and, when
// the server acknowledged it, the version it named and when the answer
// came.
type sent struct {
	body    []byte
	del     bool
	acked   bool
	version string
	at      time.Time
}

// loadRun is what a store load sent, by uuid, in the order each uuid's
// owner sent it.
type loadRun struct {
	byUUID     map[string][]*sent
	acked      int      // versions
	deleted    int      // DELETEs acknowledged
	unexpected []string // answers other than an acknowledgment or a 503
}

// storeLoad runs `clients` workers against the server at e.BaseURL, each
// storing new vCons and, one time in four, a new version of one of its
// own, one time in eight deleting one of its own (hidden, not purged),
// until stop is closed; it returns once every worker has ended. A worker
// owns its uuids, so the order of a uuid's requests is known.
func storeLoad(t testing.TB, e *testenv.Env, clients int, stop <-chan struct{}, token string) *loadRun {
	t.Helper()
	client, base := e.HTTPClient(), e.BaseURL
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-stop; cancel() }()
	defer cancel()
	run := &loadRun{byUUID: map[string][]*sent{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			var own []string
			mine := map[string][]*sent{}
			var odd []string
			for n := 0; ctx.Err() == nil; n++ {
				method, path := "POST", "/vcons"
				var u string
				switch pick := rnd.IntN(8); {
				case len(own) > 0 && pick < 2:
					u = own[rnd.IntN(len(own))]
					method, path = "PUT", "/vcons/"+u
				case len(own) > 0 && pick == 2:
					u = own[rnd.IntN(len(own))]
					method, path = "DELETE", "/vcons/"+u
				default:
					u = ids.NewRandom().String()
					own = append(own, u)
				}
				s := &sent{del: method == "DELETE"}
				if !s.del {
					subject := fmt.Sprintf("client %d request %d %s", w, n, strings.Repeat("x", rnd.IntN(4096)))
					s.body = apitest.NewVcon(u, subject, "+1555555"+fmt.Sprintf("%04d", rnd.IntN(10000)))
				}
				mine[u] = append(mine[u], s)
				status, body, err := do(ctx, client, method, base+path, token, s.body)
				if err != nil {
					continue // cut by the kill, or the end of the load
				}
				switch {
				case s.del && status == 204:
					s.acked, s.at = true, time.Now()
				case s.del && status == 404:
					// Deleted already, or its store was never acknowledged.
				case status == 201 || (method == "PUT" && status == 200):
					var a struct{ Version string }
					if json.Unmarshal(body, &a) != nil || a.Version == "" {
						odd = append(odd, fmt.Sprintf("%s %s: %d %s", method, path, status, body))
						continue
					}
					s.acked, s.version, s.at = true, a.Version, time.Now()
				case status == 503:
					// The replica is behind: refused or unacknowledged, as promised.
				default:
					odd = append(odd, fmt.Sprintf("%s %s: %d %s", method, path, status, body))
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for u, ss := range mine {
				run.byUUID[u] = ss
				for _, s := range ss {
					switch {
					case s.acked && s.del:
						run.deleted++
					case s.acked:
						run.acked++
					}
				}
			}
			run.unexpected = append(run.unexpected, odd...)
		}()
	}
	wg.Wait()
	return run
}

func do(ctx context.Context, c *http.Client, method, url, token string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/vcon")
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// verify reads every uuid of the load back from the server at e: every
// version acknowledged before `before` is among the uuid's versions with
// its size, and what GET answers is what the newest request acknowledged
// before then left (its bytes, or a 404 after a DELETE), or what a
// request sent after it left (acknowledged or not: a write the kill cut
// may have landed). It returns how many versions it had to find.
func (run *loadRun) verify(t *testing.T, e *testenv.Env, token string, before time.Time) int {
	t.Helper()
	required := 0
	for u, ss := range run.byUUID {
		last := -1 // the newest acknowledged request whose effect must be there
		stored := false
		for i, s := range ss {
			if s.acked && s.at.Before(before) {
				last = i
				if !s.del {
					required++
					stored = true
				}
			}
		}
		r := e.Do("GET", "/vcons/"+u+"/versions", token, nil)
		var listed struct {
			Versions []struct {
				Version string
				Size    int
			}
		}
		switch {
		case r.Status == 200:
			r.JSON(t, &listed)
		case r.Status == 404 && !stored:
		default:
			t.Errorf("GET /vcons/%s/versions: %d %s", u, r.Status, r.Body)
			continue
		}
		sizes := map[string]int{}
		for _, v := range listed.Versions {
			sizes[v.Version] = v.Size
		}
		for i := 0; i <= last; i++ {
			s := ss[i]
			if s.del || !s.acked || !s.at.Before(before) {
				continue
			}
			if size, ok := sizes[s.version]; !ok || size != len(s.body) {
				t.Errorf("%s: the acknowledged version %s (request %d of %d) is not among the restored versions %v (size %d, want %d)",
					u, s.version, i+1, len(ss), listed.Versions, size, len(s.body))
			}
		}
		r = e.Do("GET", "/vcons/"+u, token, nil)
		match := -1
		for i := max(last, 0); i < len(ss); i++ {
			gone := ss[i].del || (i == 0 && last < 0)
			if (r.Status == 404 && gone) || (r.Status == 200 && !ss[i].del && bytes.Equal(r.Body, ss[i].body)) {
				match = i
			}
		}
		if match < 0 {
			t.Errorf("GET /vcons/%s: %d, %d bytes: neither what the newest request acknowledged before the kill left (request %d of %d) nor what one sent after it left",
				u, r.Status, len(r.Body), last+1, len(ss))
			continue
		}
		if s := ss[match]; r.Status == 200 && s.acked && r.Header.Get("ETag") != "" && strings.Trim(r.Header.Get("ETag"), `"`) != s.version {
			t.Errorf("GET /vcons/%s: ETag %s, the acknowledged version is %s", u, r.Header.Get("ETag"), s.version)
		}
	}
	return required
}

// checkDeep runs check --deep with the server stopped and fails the test
// unless it exits 0 with no damage and no problem, the replica's included.
func checkDeep(t *testing.T, e *testenv.Env) {
	t.Helper()
	out, errOut, code := e.TryCLI("check", "--deep")
	if code != 0 || !strings.Contains(out, `"damaged":[]`) || strings.Contains(out, `"problems":["`) {
		t.Errorf("check --deep: exit %d\n%s\n%s", code, out, errOut)
	}
}

// serveLog is the lines of the binary's log worth showing after a failure.
func serveLog(t *testing.T, e *testenv.Env) {
	b, err := os.ReadFile(filepath.Join(e.Dir, "serve.log"))
	if err != nil {
		return
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "replica") || strings.Contains(l, "recovery") || strings.Contains(l, "ERROR") || strings.Contains(l, "WARN") {
			t.Log(l)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// metricValue is the value of the unlabelled sample name on a /metrics
// page, 0 when there is none.
func metricValue(text, name string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v
		}
	}
	return 0
}

// Package reliability holds the tests that break things on purpose: a
// storage that fails under the server, kills at every crash point, load
// for a fixed time, hostile clients, keys of the wrong tenant, and fuzzed
// requests. Each has a short form that `go test ./...` runs in seconds
// and, where it helps, a long form that `make soak` runs by setting
// VCON_SOAK to a duration (VCON_SOAK=10m).
package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/faultproxy"
	"github.com/vcon-server/vcon-server/test/kit/load"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// soak returns the long-form duration from VCON_SOAK, and whether it is
// set; short is what the test runs otherwise.
func soak(t testing.TB, short time.Duration) (time.Duration, bool) {
	v := os.Getenv("VCON_SOAK")
	if v == "" {
		return short, false
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("VCON_SOAK=%q: want a duration such as 10m", v)
	}
	return d, true
}

// proxied is a real S3 server with a fault proxy in front of it.
type proxied struct {
	srv   *s3test.Server
	proxy *faultproxy.Proxy
	caDir string
}

func startProxied(t testing.TB) *proxied {
	t.Helper()
	srv := s3test.Start(t, "versitygw")
	p, err := faultproxy.Start(srv.Endpoint, srv.CAPEM, faultproxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	t.Logf("fault proxy seed %d", p.Seed())
	return &proxied{srv: srv, proxy: p, caDir: t.TempDir()}
}

// storageTOML is srv.StorageTOML with the endpoint and CA of the proxy:
// the server signs for the proxy's host, which the proxy forwards.
func (p *proxied) storageTOML(t testing.TB, bucket, prefix string) string {
	t.Helper()
	ca := filepath.Join(p.caDir, "proxy-ca.pem")
	if err := p.proxy.WriteCA(ca); err != nil {
		t.Fatal(err)
	}
	toml := p.srv.StorageTOML(t, bucket, prefix)
	toml = strings.Replace(toml, fmt.Sprintf("endpoint = %q", p.srv.Endpoint), fmt.Sprintf("endpoint = %q", p.proxy.URL), 1)
	toml = strings.Replace(toml, fmt.Sprintf("ca_file = %q", p.srv.CAFile), fmt.Sprintf("ca_file = %q", ca), 1)
	if !strings.Contains(toml, p.proxy.URL) || !strings.Contains(toml, ca) {
		t.Fatalf("could not point the storage at the proxy:\n%s", toml)
	}
	return toml
}

// absorbable are faults at a modest rate that the S3 client's retries
// absorb: none hands the server an answer it has started to read.
func absorbable(rate float64) []faultproxy.Rule {
	return []faultproxy.Rule{
		{Fault: faultproxy.Status503, Prob: rate},
		{Fault: faultproxy.Status500, Prob: rate / 2},
		{Fault: faultproxy.Reset, Prob: rate},
		{Fault: faultproxy.DropResponse, Prob: rate},
		{Fault: faultproxy.Delay, Prob: rate / 2, Delay: 30 * time.Millisecond},
	}
}

// harsh adds faults no retry can hide (bodies cut after the headers) at a
// higher rate: requests fail, and must fail cleanly.
func harsh(rate float64) []faultproxy.Rule {
	return append([]faultproxy.Rule{
		{Method: "^GET$", Path: "/objects/", Fault: faultproxy.CutBody, Prob: rate},
	}, absorbable(rate)...)
}

// tenants makes n tenants with a write, read and delete key each; every
// other one has retention 0d, so its deletes purge at once.
func tenants(e *testenv.Env, n int) []load.Tenant {
	var ts []load.Tenant
	for i := 0; i < n; i++ {
		id := e.Tenant(fmt.Sprintf("load-%02d", i))
		purge := i%2 == 1
		if purge {
			e.CLI("tenant", "set-retention", id, "0d")
		}
		ts = append(ts, load.Tenant{ID: id, Token: e.NewKey(id, "write", "read", "delete").Token, Purge: purge})
	}
	return ts
}

func certPEM(t testing.TB, e *testenv.Env) []byte {
	b, err := os.ReadFile(e.Config.TLS.Cert)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkLine is one tenant's line of vcon-server check.
type checkLine struct {
	Name     string
	Versions int
	Objects  int
	Packed   int
	Damaged  []string
	Problems []string
}

// checkClean stops the server and runs check --deep, which must find no
// damage and no problem.
func checkClean(t testing.TB, e *testenv.Env) []checkLine {
	t.Helper()
	e.Stop()
	out, errOut, code := e.TryCLI("check", "--deep")
	var lines []checkLine
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" || strings.HasPrefix(l, `{"replica":`) || strings.HasPrefix(l, `{"admin_log":`) {
			continue // the last lines: the admin log, and the catalog's replica or the warning that there is none
		}
		var c checkLine
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("check line %q: %v", l, err)
		}
		if len(c.Damaged) > 0 || len(c.Problems) > 0 {
			t.Errorf("check: tenant %s: damaged %v, problems %v", c.Name, c.Damaged, c.Problems)
		}
		lines = append(lines, c)
	}
	if code != 0 {
		t.Fatalf("check --deep exit %d: %s\n%s", code, errOut, out)
	}
	return lines
}

// runLoad runs the load generator in-process and fails the test on any
// error or lost version.
func runLoad(t testing.TB, cfg load.Config) load.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+10*time.Minute)
	defer cancel()
	rep, err := load.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Logf("load: %s", rep.Summary())
	t.Logf("load report: %s", rep.JSON())
	if rep.Errors != 0 || rep.Lost != 0 {
		t.Fatalf("load: %d errors, %d lost; first: %v", rep.Errors, rep.Lost, rep.FirstErrors)
	}
	if rep.VersionsAcked == 0 || rep.Verified == 0 {
		t.Fatalf("load: nothing acknowledged or verified: %s", rep.JSON())
	}
	return rep
}

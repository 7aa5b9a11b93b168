// Command loadgen loads a running vcon-server on this host with a mix of
// stores, replaces, reads, deletes and purges over many tenants for a
// fixed time, then reads every vCon back and checks it against what the
// answers acknowledged. It prints one JSON line (throughput, errors, p50
// and p99 latency per operation) and exits 1 when any request erred or
// any acknowledged version was lost.
//
// Tenants and keys come from one of:
//
//	-config FILE   the server's configuration: loadgen creates -tenants
//	               tenants and a key for each with the CLI (beside the
//	               running server), half of them with retention 0d so
//	               their deletes are purges;
//	-keys FILE     JSON lines as `vcon-server key create` prints them, each
//	               a key with the write, read and delete scopes; with
//	               -token (an operator key) loadgen sets retention 0d on
//	               every other tenant through the admin API.
//
// -ca names the server's certificate (its tls.cert) or the CA that signed
// it: loadgen verifies the server as any client would.
//
// Example, against `make run`'s server:
//
//	go run ./scripts/loadgen -url https://127.0.0.1:8443 -ca .local/cert.pem -config .local/vcon-server.toml -duration 30s
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/cli"
	"github.com/vcon-server/vcon-server/test/kit/load"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// Main runs the command; tests call it in-process.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	serverURL := fs.String("url", "", "the server, https://127.0.0.1:PORT (loopback only)")
	caFile := fs.String("ca", "", "PEM of the server's certificate (its tls.cert) or its CA")
	cfgFile := fs.String("config", "", "the server's configuration: create tenants and keys with the CLI")
	keysFile := fs.String("keys", "", "JSON lines of tenant keys (write, read, delete) instead of -config")
	token := fs.String("token", "", "an operator token, with -keys: sets retention 0d on every other tenant")
	tenants := fs.Int("tenants", 8, "tenants to create with -config")
	workers := fs.Int("workers", 16, "concurrent clients")
	duration := fs.Duration("duration", 10*time.Second, "how long the mixed load runs")
	maxReq := fs.Int64("max-requests", 1_000_000, "stop after this many requests")
	maxBody := fs.Int("max-body", 64<<10, "largest vCon in bytes")
	seed := fs.Uint64("seed", 0, "seed of the operation mix (random when 0)")
	faulty := fs.Bool("faulty", false, "storage faults are injected: count 5xx as failed, not as errors")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "loadgen: %v\n", err)
		return 1
	}
	if *serverURL == "" || (*cfgFile == "") == (*keysFile == "") {
		return fail(errors.New("give -url and one of -config or -keys"))
	}
	if *tenants < 1 || *tenants > 1000 {
		return fail(errors.New("-tenants must be from 1 to 1000"))
	}
	if *caFile == "" {
		return fail(errors.New("give -ca, the server's certificate (its tls.cert) or its CA"))
	}
	ca, err := os.ReadFile(*caFile)
	if err != nil {
		return fail(fmt.Errorf("-ca: %w", err))
	}
	var ts []load.Tenant
	if *cfgFile != "" {
		if ts, err = makeTenants(ctx, *cfgFile, *tenants); err != nil {
			return fail(err)
		}
	}
	client, err := load.NewClient(ca, *workers)
	if err != nil {
		return fail(err)
	}
	if *keysFile != "" {
		if ts, err = readKeys(ctx, *keysFile, *serverURL, *token, client); err != nil {
			return fail(err)
		}
	}
	rep, err := load.Run(ctx, load.Config{
		URL: *serverURL, CAPEM: ca, Tenants: ts, Workers: *workers, Duration: *duration,
		MaxRequests: *maxReq, MaxBody: *maxBody, Seed: *seed, Faulty: *faulty, Client: client,
	})
	if err != nil && rep.Requests == 0 {
		return fail(err)
	}
	fmt.Fprintln(stdout, rep.JSON())
	if rep.Errors > 0 || rep.Lost > 0 || err != nil {
		fmt.Fprintf(stderr, "loadgen: %s\n", rep.Summary())
		return 1
	}
	return 0
}

// vconServer runs `vcon-server ARGS --config cfgFile` in-process and
// returns what it printed.
func vconServer(ctx context.Context, cfgFile string, args ...string) ([]byte, error) {
	var out, errOut bytes.Buffer
	if code := cli.Main(ctx, append(args, "--config", cfgFile), &out, &errOut); code != 0 {
		return nil, fmt.Errorf("vcon-server %s: %s", strings.Join(args, " "), strings.TrimSpace(errOut.String()))
	}
	return out.Bytes(), nil
}

// makeTenants creates n tenants with a key each through the CLI, which
// runs beside the serving server over the shared catalog.
func makeTenants(ctx context.Context, cfgFile string, n int) ([]load.Tenant, error) {
	run := func(args ...string) ([]byte, error) { return vconServer(ctx, cfgFile, args...) }
	stamp := time.Now().UTC().Format("20060102-150405")
	var ts []load.Tenant
	for i := 0; i < n; i++ {
		out, err := run("tenant", "create", fmt.Sprintf("load-%s-%03d", stamp, i))
		if err != nil {
			return nil, err
		}
		var t struct{ ID string }
		if err := json.Unmarshal(out, &t); err != nil {
			return nil, err
		}
		purge := i%2 == 1
		if purge {
			if _, err := run("tenant", "set-retention", t.ID, "0d"); err != nil {
				return nil, err
			}
		}
		out, err = run("key", "create", "--tenant", t.ID, "--scope", "write", "--scope", "read", "--scope", "delete", "--label", "loadgen")
		if err != nil {
			return nil, err
		}
		var k struct{ Token string }
		if err := json.Unmarshal(out, &k); err != nil {
			return nil, err
		}
		ts = append(ts, load.Tenant{ID: t.ID, Token: k.Token, Purge: purge})
	}
	return ts, nil
}

// readKeys reads keys as `key create` prints them; with an operator token
// it sets retention 0d on every other tenant.
func readKeys(ctx context.Context, path, serverURL, token string, client *http.Client) ([]load.Tenant, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ts []load.Tenant
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var t load.Tenant
		if err := json.Unmarshal([]byte(line), &t); err != nil || t.ID == "" || t.Token == "" {
			return nil, fmt.Errorf("%s: each line is a key as vcon-server key create prints it", path)
		}
		if token != "" && !seen[t.ID] && len(seen)%2 == 1 {
			if err := setRetention(ctx, client, serverURL, token, t.ID); err != nil {
				return nil, err
			}
			t.Purge = true
		}
		seen[t.ID] = true
		ts = append(ts, t)
	}
	return ts, sc.Err()
}

func setRetention(ctx context.Context, client *http.Client, serverURL, token, tenant string) error {
	req, err := http.NewRequestWithContext(ctx, "PUT", serverURL+"/admin/tenants/"+tenant+"/retention", strings.NewReader(`{"retention":"0d"}`))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("set retention of tenant %s: %d %s", tenant, resp.StatusCode, b)
	}
	return nil
}

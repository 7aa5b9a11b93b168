// Package testenv starts a real vcon-server for tests: a data directory
// made by init, a catalog, real TLS on loopback, tenants and keys made by
// the CLI, and an HTTPS client that trusts the server's certificate.
package testenv

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/cli"
	"github.com/vcon-server/vcon-server/internal/config"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/logline"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/server"
	"github.com/vcon-server/vcon-server/webhook"
)

// Options shape the server a test gets.
type Options struct {
	// Retention is [retention] default ("30d" when empty).
	Retention string
	// MaxVconSize is max_vcon_size ("64MiB" when empty).
	MaxVconSize string
	// MinFree is min_free ("64MiB" when empty, not the default 1 GiB: a
	// test's stores must not depend on how full the host's disk is).
	MinFree string
	// Storage is TOML appended to the configuration ([storage] tables).
	Storage string
	// Now is the server's clock (time.Now when nil).
	Now func() time.Time
	// Listen is the listen address ("127.0.0.1:0" when empty); a server
	// run as a separate process needs a fixed port (FreePort).
	Listen string
	// Limits are the in-process server's timeouts and guards (defaults
	// when zero).
	Limits server.Limits
	// Webhooks is the in-process server's webhook retry policy
	// (webhook.DefaultPolicy when zero).
	Webhooks webhook.Policy
}

// Env is one server and what a test needs to talk to it.
type Env struct {
	T          testing.TB
	Dir        string
	ConfigPath string
	Config     *config.Config
	Daemon     *cli.Daemon
	Client     *http.Client
	BaseURL    string
	Log        *syncBuffer
	opts       Options
}

// Key is a key made for a test.
type Key struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	Token  string `json:"token"`
	// Purposes are what the key reads for (key create --purpose).
	Purposes []string `json:"purposes"`
}

// New makes a data directory with init and starts a server on it.
func New(t testing.TB, opts Options) *Env {
	t.Helper()
	e := Prepare(t, opts)
	e.Start()
	return e
}

// Prepare makes the configuration and runs init, starting nothing.
func Prepare(t testing.TB, opts Options) *Env {
	t.Helper()
	dir := t.TempDir()
	e := &Env{T: t, Dir: dir, ConfigPath: filepath.Join(dir, "vcon-server.toml"), opts: opts, Log: &syncBuffer{}}
	e.WriteConfig("")
	e.CLI("init")
	return e
}

// WriteConfig writes the configuration file, with extra TOML at its end.
func (e *Env) WriteConfig(extra string) {
	ret := e.opts.Retention
	if ret == "" {
		ret = "30d"
	}
	size := e.opts.MaxVconSize
	if size == "" {
		size = "64MiB"
	}
	listen := e.opts.Listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	minFree := e.opts.MinFree
	if minFree == "" {
		minFree = "64MiB"
	}
	text := fmt.Sprintf(`listen = %q
data_dir = "data"
master_key = "master.key"
max_vcon_size = %q
min_free = %q

[tls]
cert = "cert.pem"
key = "key.pem"

[retention]
default = %q
purge_interval = 3600

[log]
level = "debug"
%s
%s
`, listen, size, minFree, ret, e.opts.Storage, extra)
	if err := os.WriteFile(e.ConfigPath, []byte(text), 0o600); err != nil {
		e.T.Fatal(err)
	}
	cfg, err := config.Load(e.ConfigPath)
	if err != nil {
		e.T.Fatalf("configuration: %v\n%s", err, text)
	}
	e.Config = cfg
}

// Start starts the server in this process.
func (e *Env) Start() {
	e.T.Helper()
	if err := e.TryStart(); err != nil {
		e.T.Fatalf("start: %v\nlog:\n%s", err, e.Log.String())
	}
}

// TryStart starts the server and returns its refusal, if any.
func (e *Env) TryStart() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	cfg, err := config.Load(e.ConfigPath)
	if err != nil {
		ln.Close()
		return err
	}
	e.Config = cfg
	d, err := cli.Start(context.Background(), cfg, logline.New(e.Log, "debug", "serve"), cli.Options{Now: e.opts.Now, Listener: ln, Limits: e.opts.Limits, Webhooks: e.opts.Webhooks})
	if err != nil {
		ln.Close()
		return err
	}
	e.Daemon = d
	e.BaseURL = "https://" + d.Addr()
	e.Client = e.HTTPClient()
	e.T.Cleanup(func() { e.Stop() })
	return nil
}

// HTTPClient trusts the server's certificate and never decompresses.
func (e *Env) HTTPClient() *http.Client {
	pem, err := os.ReadFile(e.Config.TLS.Cert)
	if err != nil {
		e.T.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, ServerName: "localhost"},
		DisableCompression:  true,
		MaxIdleConnsPerHost: 64,
	}}
}

// Stop shuts the server down gracefully (nothing when stopped).
func (e *Env) Stop() {
	if e.Daemon == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.Daemon.Close(ctx)
	e.Daemon = nil
}

// Restart stops and starts the server on the same data directory.
func (e *Env) Restart() {
	e.Stop()
	e.Start()
}

// CLI runs a command in this process with --config and returns its
// standard output; it fails the test when the command fails.
func (e *Env) CLI(args ...string) string {
	e.T.Helper()
	out, errOut, code := e.TryCLI(args...)
	if code != 0 {
		e.T.Fatalf("vcon-server %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

// TryCLI runs a command and returns its output, error output and status.
func (e *Env) TryCLI(args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	code := cli.Main(context.Background(), append(args, "--config", e.ConfigPath), &out, &errOut)
	return out.String(), errOut.String(), code
}

// Tenant creates a tenant and returns its id.
func (e *Env) Tenant(name string) string {
	var t struct{ ID string }
	if err := json.Unmarshal([]byte(e.CLI("tenant", "create", name)), &t); err != nil {
		e.T.Fatal(err)
	}
	return t.ID
}

// NewKey creates a tenant key with the given scopes.
func (e *Env) NewKey(tenant string, scopes ...string) Key {
	args := []string{"key", "create", "--tenant", tenant, "--label", "test-" + strings.Join(scopes, "-")}
	for _, s := range scopes {
		args = append(args, "--scope", s)
	}
	var k Key
	if err := json.Unmarshal([]byte(e.CLI(args...)), &k); err != nil {
		e.T.Fatal(err)
	}
	return k
}

// OperatorKey creates an operator key holding scopes, or every operator
// scope without.
func (e *Env) OperatorKey(scopes ...string) Key {
	args := []string{"key", "create", "--operator", "--label", "ops"}
	for _, s := range scopes {
		args = append(args, "--scope", s)
	}
	var k Key
	if err := json.Unmarshal([]byte(e.CLI(args...)), &k); err != nil {
		e.T.Fatal(err)
	}
	return k
}

// Response is an answer read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v.
func (r Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("body %q: %v", r.Body, err)
	}
}

// Do sends one request; headers alternate name, value.
func (e *Env) Do(method, path, token string, body []byte, headers ...string) Response {
	e.T.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, e.BaseURL+path, rd)
	if err != nil {
		e.T.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := e.Client.Do(req)
	if err != nil {
		e.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.T.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// syncBuffer is a log sink tests can read while the server writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// built is a command built once per test process, pure Go as released
// (CGO_ENABLED=0) but with the crash points of package crashpoint.
type built struct {
	pkg  string // the package to build, relative to the module root
	tags string // more build tags than crashpoints
	once sync.Once
	path string
	err  error
}

func (b *built) get(t testing.TB) string {
	t.Helper()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "vcon-server-bin")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "vcon-server")
		cmd := exec.Command("go", "build", "-tags", strings.TrimSuffix("crashpoints,"+b.tags, ","), "-o", b.path, b.pkg)
		cmd.Dir = ModuleRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

var binary = built{pkg: "."}

// noLogTrees is the command whose records are not leaves of their logs
// (build tag nologtree): the baseline of the logs' cost benchmarks.
var noLogTrees = built{pkg: ".", tags: "nologtree"}

// Binary builds the vcon-server command once per test process, pure Go
// as released (CGO_ENABLED=0) but with the crash points of package
// crashpoint, and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	return binary.get(t)
}

// ModuleRoot is the directory holding go.mod.
func ModuleRoot(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Shared returns the path of a file under ../shared (the vCons and test
// suites others wrote). When it is absent the test is skipped, loudly, on a
// developer's machine, and fails in CI, where it must be present.
func Shared(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(ModuleRoot(t), "..", "shared", rel)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing: CI must have ../shared beside the checkout", p)
		}
		t.Skipf("NOT RUN: %s is absent (../shared beside the checkout holds it)", p)
	}
	return p
}

// Store opens the server's object store as a second client would.
func (e *Env) Store() objstore.Store {
	e.T.Helper()
	if e.Config.Storage.Objects == "s3" {
		c := e.Config.Storage.S3
		client, err := cli.NewS3Client("storage.s3", c)
		if err != nil {
			e.T.Fatal(err)
		}
		return objstore.NewS3(client, c.Bucket, c.Prefix, e.T.TempDir())
	}
	d, err := objstore.NewDir(e.Config.DataDir)
	if err != nil {
		e.T.Fatal(err)
	}
	return d
}

// Count counts the stored objects of one kind ("objects", "purged") of
// every tenant, in the data directory or the bucket; with Parquet storage,
// "objects" counts the rows of pack files too.
func (e *Env) Count(kind string) int {
	e.T.Helper()
	seen := map[string]bool{} // version ids: an object and a packed row of one version count once
	err := e.Store().List(context.Background(), "", func(info objstore.Info) error {
		parts := strings.Split(info.Key, "/")
		switch {
		case len(parts) == 3 && parts[0] == kind: // objects/<tenant>/<version>
			seen[parts[2]] = true
		case len(parts) == 4 && parts[0] == "tenants" && parts[2] == kind:
			seen[parts[3]] = true
		}
		return nil
	})
	if err != nil {
		e.T.Fatal(err)
	}
	if kind == "objects" && e.Config.Storage.Parquet != nil {
		// With Parquet storage a version's bytes may be a row of a pack
		// file instead; a pack run between its commit and the delete of
		// the packed objects holds both for a moment.
		cat, err := catalog.Open(context.Background(), e.Config.DataDir)
		if err != nil {
			e.T.Fatal(err)
		}
		defer cat.Close()
		rows, err := cat.DB().Query(`SELECT id FROM versions WHERE location = 'packed'`)
		if err != nil {
			e.T.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				e.T.Fatal(err)
			}
			var id ids.ID
			copy(id[:], b)
			seen[id.String()] = true
		}
		if err := rows.Err(); err != nil {
			e.T.Fatal(err)
		}
	}
	return len(seen)
}

// WaitLog waits up to 10 s for s in the in-process server's log after its
// first from bytes (0: the whole log).
func (e *Env) WaitLog(from int, s string) {
	e.T.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(e.Log.String()[from:], s); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			e.T.Fatalf("no %q in the log in 10 s:\n%s", s, e.Log.String()[from:])
		}
	}
}

// WaitCheckpoint waits up to 5 s for the tenant's audit-log checkpoint,
// read with token (of scope audit), to cover size records, and returns it.
func (e *Env) WaitCheckpoint(token string, size int) []byte {
	e.T.Helper()
	want := "\n" + strconv.Itoa(size) + "\n"
	var cp []byte
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cp = e.Do("GET", "/audit/log/checkpoint", token, nil).Body; strings.Contains(string(cp), want) {
			return cp
		}
	}
	e.T.Fatalf("the checkpoint does not cover %d records in 5 s:\n%s", size, cp)
	return nil
}

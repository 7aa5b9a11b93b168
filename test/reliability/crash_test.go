package reliability

import (
	"bytes"
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// crashScenarios say, for each named crash point, how to drive the real
// binary through it. Adding a crash point is one line here; the test
// below fails for a point in the source that has none.
var crashScenarios = map[string]crashScenario{
	crashpoint.StoreAfterObject:         crashStore,
	crashpoint.StoreAfterCommit:         crashStore,
	crashpoint.PurgeAfterKey:            crashPurge,
	crashpoint.PurgeAfterCount:          crashPurge,
	crashpoint.PurgeAfterTombstone:      crashPurge,
	crashpoint.PurgeAfterDelete:         crashPurge,
	crashpoint.RotateBeforeCommit:       crashRotate,
	crashpoint.KeyMoveAfterKeys:         crashKeyMove,
	crashpoint.KeyMoveAfterPage:         crashKeyMove,
	crashpoint.EraseAfterBatch:          crashErase,
	crashpoint.EraseAfterKeys:           crashErase,
	crashpoint.EraseAfterPurges:         crashErase,
	crashpoint.PackAfterPut:             crashPackRun,
	crashpoint.PackAfterCommit:          crashPackRun,
	crashpoint.PackAfterDeletes:         crashPackRun,
	crashpoint.MergeAfterPut:            crashPackRun,
	crashpoint.MergeAfterCommit:         crashPackRun,
	crashpoint.ManifestAfterPut:         crashPackRun,
	crashpoint.RewriteAfterPut:          crashRewrite,
	crashpoint.RewriteAfterCommit:       crashRewrite,
	crashpoint.RewriteAfterDelete:       crashRewrite,
	crashpoint.MoveAfterCopy:            crashMove,
	crashpoint.MoveAfterCommit:          crashMove,
	crashpoint.ExportAfterFile:          crashExport,
	crashpoint.ExportBeforeManifest:     crashExport,
	crashpoint.ReserveReleased:          crashReserve,
	crashpoint.WebhookAfterDelivery:     crashWebhook,
	crashpoint.LogAfterNodes:            crashAuditLog,
	crashpoint.LogAfterSign:             crashAuditLog,
	crashpoint.TenantDeleteAfterKey:     crashTenantDelete,
	crashpoint.TenantDeleteAfterObjects: crashTenantDelete,
	crashpoint.TenantDeleteAfterRows:    crashTenantDelete,
}

// crashScenario drives the binary until it dies at point, restarts, and
// checks: every acknowledged version reads back byte-identical, and
// check --deep finds nothing wrong.
type crashScenario func(t *testing.T, c *crashEnv, point string)

// crashEnv is what every scenario shares: one S3 server.
type crashEnv struct {
	once sync.Once
	srv  *s3test.Server
	t    *testing.T
}

func (c *crashEnv) s3(t *testing.T) *s3test.Server {
	c.once.Do(func() { c.srv = s3test.Start(c.t, "versitygw") })
	if c.srv == nil {
		t.Fatal("no S3 server")
	}
	return c.srv
}

// TestCrashPoints walks every crash point: the binary is killed there
// (SIGKILL, as a power cut), restarted, and must have lost nothing it
// acknowledged and left nothing check calls damaged.
func TestCrashPoints(t *testing.T) {
	points := sourceCrashPoints(t)
	c := &crashEnv{t: t}
	for _, p := range points {
		t.Run(p, func(t *testing.T) {
			run, ok := crashScenarios[p]
			if !ok {
				t.Fatalf("crash point %q has no scenario: add a line to crashScenarios in test/reliability/crash_test.go", p)
			}
			run(t, c, p)
		})
	}
	for p := range crashScenarios {
		if !slices.Contains(points, p) {
			t.Errorf("crashScenarios names %q, which no crashpoint.Hit in the source reaches", p)
		}
	}
	t.Logf("crash points walked: %d", len(points))
}

// sourceCrashPoints finds every point the code can die at: the argument of
// each crashpoint.Hit call outside tests, which must be a constant of
// package crashpoint (one vocabulary, internal/crashpoint/doc.go).
func sourceCrashPoints(t *testing.T) []string {
	root := testenv.ModuleRoot(t)
	fset := token.NewFileSet()
	consts := map[string]string{} // name in package crashpoint → value
	var calls []ast.Expr
	var where []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return nil // a file another engineer is halfway through
		}
		if f.Name.Name == "crashpoint" {
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								consts[name.Name], _ = strconv.Unquote(lit.Value)
							}
						}
					}
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Hit" {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "crashpoint" {
					calls = append(calls, call.Args[0])
					where = append(where, fset.Position(call.Pos()).String())
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var points []string
	for i, arg := range calls {
		var name string
		if a, ok := arg.(*ast.SelectorExpr); ok {
			if x, ok := a.X.(*ast.Ident); ok && x.Name == "crashpoint" {
				name = consts[a.Sel.Name]
			}
		}
		if name == "" {
			t.Errorf("%s: crashpoint.Hit takes a constant of package crashpoint, so every point has one name", where[i])
			continue
		}
		if !slices.Contains(points, name) {
			points = append(points, name)
		}
	}
	slices.Sort(points)
	if len(points) < 5 {
		t.Fatalf("only %d crash points found in the source: %v", len(points), points)
	}
	return points
}

// acked is what the server acknowledged: uuid → bytes (nil: deleted).
type acked map[string][]byte

func storeSome(t *testing.T, e *testenv.Env, token string, n int, a acked) {
	t.Helper()
	for i := 0; i < n; i++ {
		u := ids.NewRandom().String()
		body := apitest.NewVcon(u, "crash "+strconv.Itoa(i), "+15555550100")
		body = append(body[:len(body)-1], []byte(`,"pad":"`+strings.Repeat("p", 2000+i*100)+`"}`)...)
		if r := e.Do("POST", "/vcons", token, body, "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("POST: %d %s", r.Status, r.Body)
		}
		a[u] = body
	}
}

func verifyAcked(t *testing.T, e *testenv.Env, token string, a acked) {
	t.Helper()
	for u, body := range a {
		got := e.Do("GET", "/vcons/"+u, token, nil)
		if body == nil {
			if got.Status != 404 {
				t.Errorf("%s was deleted, then reads %d", u, got.Status)
			}
			continue
		}
		if got.Status != 200 || !bytes.Equal(got.Body, body) {
			t.Errorf("%s was acknowledged, then reads %d with %d bytes (want %d)", u, got.Status, len(got.Body), len(body))
		}
	}
}

// sendUntilDeath sends a request the server must die during.
func sendUntilDeath(t *testing.T, e *testenv.Env, p *testenv.Proc, point, method, path, token string, body []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, e.BaseURL+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		ct := "application/vcon"
		if strings.HasPrefix(path, "/erasures") {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if resp, err := e.Client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the server answered %d instead of dying at %s", resp.StatusCode, point)
	}
	p.Wait()
}

// runKilled runs the binary with the crash point set and requires that it
// die by SIGKILL within a minute.
func runKilled(t *testing.T, e *testenv.Env, point string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.Binary(t), append(args, "--config", e.ConfigPath)...)
	cmd.Env = append(os.Environ(), crashpoint.EnvVar+"="+point)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if ctx.Err() != nil {
		t.Fatalf("vcon-server %v never reached %s in a minute:\n%s", args, point, tail(out))
	}
	if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("vcon-server %v was not killed at %s: %v\n%s", args, point, err, tail(out))
	}
}

func tail(b []byte) string {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// binaryEnv prepares a data directory, in the bucket when s3 is set, for
// the real binary on a fixed port.
func binaryEnv(t *testing.T, c *crashEnv, s3 bool, extra string, opts testenv.Options) *testenv.Env {
	opts.Listen = testenv.FreePort(t)
	if s3 {
		srv := c.s3(t)
		opts.Storage = srv.StorageTOML(t, srv.NewBucket(t, false), "crash/") + extra
	}
	return testenv.Prepare(t, opts)
}

// recoverAndCheck starts the binary, reads every acknowledged vCon back,
// stops it, and runs check --deep. With parquet set it first waits for the
// pack run the start runs, so check sees what that run finished.
func recoverAndCheck(t *testing.T, e *testenv.Env, token string, a acked, parquet ...bool) {
	t.Helper()
	runs := 0
	if b, err := os.ReadFile(filepath.Join(e.Dir, "serve.log")); err == nil {
		runs = strings.Count(string(b), "pack run")
	}
	p := e.StartBinary()
	if len(parquet) > 0 && parquet[0] {
		waitLog(t, p, "pack run", runs+1)
	}
	verifyAcked(t, e, token, a)
	p.Stop()
	if out, errOut, code := e.TryCLI("check", "--deep"); code != 0 || strings.Contains(out, `"damaged":["`) || strings.Contains(out, `"problems":["`) {
		t.Fatalf("check --deep after recovery: exit %d\n%s%s", code, out, errOut)
	}
}

func crashStore(t *testing.T, c *crashEnv, point string) {
	// e2e covers the data directory; this runs it with a bucket.
	e := binaryEnv(t, c, true, "", testenv.Options{})
	k := e.NewKey(e.Tenant("acme"), "write", "read")
	a := acked{}
	p := e.StartBinary()
	storeSome(t, e, k.Token, 3, a)
	p.Stop()
	p = e.StartBinary(crashpoint.EnvVar + "=" + point)
	u := ids.NewRandom().String()
	body := apitest.NewVcon(u, "cut", "+15555550100")
	sendUntilDeath(t, e, p, point, "POST", "/vcons", k.Token, body)
	recoverAndCheck(t, e, k.Token, a)
	// The store that was cut is there whole or not at all.
	p = e.StartBinary()
	got := e.Do("GET", "/vcons/"+u, k.Token, nil)
	p.Stop()
	if !(got.Status == 404 || got.Status == 200 && bytes.Equal(got.Body, body)) {
		t.Fatalf("the cut store reads %d with %d bytes", got.Status, len(got.Body))
	}
}

func crashPurge(t *testing.T, c *crashEnv, point string) {
	e := binaryEnv(t, c, true, "", testenv.Options{Retention: "0d"})
	k := e.NewKey(e.Tenant("acme"), "write", "read", "delete")
	a := acked{}
	p := e.StartBinary()
	storeSome(t, e, k.Token, 3, a)
	p.Stop()
	var victim string
	for u := range a {
		victim = u
		break
	}
	p = e.StartBinary(crashpoint.EnvVar + "=" + point)
	sendUntilDeath(t, e, p, point, "DELETE", "/vcons/"+victim, k.Token, nil)
	// The DELETE never answered; its purge had started, so it must end
	// as a purge at the next start.
	a[victim] = nil
	recoverAndCheck(t, e, k.Token, a)
	if n := e.Count("objects"); n != 2 {
		t.Fatalf("%d objects after the purge was finished, want 2", n)
	}
}

func crashRotate(t *testing.T, c *crashEnv, point string) {
	e := binaryEnv(t, c, false, "", testenv.Options{})
	k := e.NewKey(e.Tenant("acme"), "write", "read")
	a := acked{}
	p := e.StartBinary()
	storeSome(t, e, k.Token, 3, a)
	p.Stop()
	webhookWorks := rotationWebhook(t, e, "acme", k.Token)
	newKey := filepath.Join(e.Dir, "new.key")
	if err := os.WriteFile(newKey, bytes.Repeat([]byte{7}, 32), 0o400); err != nil {
		t.Fatal(err)
	}
	runKilled(t, e, point, "master-key", "rotate", "--new", newKey)
	// Nothing committed: the old key still opens everything, the webhook
	// secret too.
	webhookWorks()
	recoverAndCheck(t, e, k.Token, a)
}

const parquetTOML = "\n[storage.parquet]\npack_interval = 3600\n"

// waitLog waits until the server's log holds n lines containing s.
func waitLog(t *testing.T, p *testenv.Proc, s string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(p.Log)
		if strings.Count(string(b), s) >= n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(p.Log)
	t.Fatalf("no %d× %q in the log:\n%s", n, s, tail(b))
}

// packed prepares a bucket with Parquet storage where batch A is packed
// into one file and batch B waits as objects, the server stopped. The log
// has one "pack run" line per start so far.
func packed(t *testing.T, c *crashEnv, retention string) (*testenv.Env, testenv.Key, acked, int) {
	e := binaryEnv(t, c, true, parquetTOML, testenv.Options{Retention: retention})
	k := e.NewKey(e.Tenant("acme"), "write", "read", "delete")
	a := acked{}
	p := e.StartBinary()
	waitLog(t, p, "pack run", 1)
	storeSome(t, e, k.Token, 4, a)
	p.Stop()
	p = e.StartBinary()
	waitLog(t, p, "pack run files=1", 1)
	storeSome(t, e, k.Token, 4, a)
	p.Stop()
	return e, k, a, 2
}

// crashPackRun kills the pack run that a start runs: it packs batch B
// into a second file, merges the two, and writes the manifest.
func crashPackRun(t *testing.T, c *crashEnv, point string) {
	e, k, a, _ := packed(t, c, "")
	runKilled(t, e, point, "serve")
	// The start after the kill recovers, then its pack run packs and
	// merges what the cut run left; a second start finds all in order.
	recoverAndCheck(t, e, k.Token, a, true)
	recoverAndCheck(t, e, k.Token, a, true)
}

// crashRewrite kills a purge of a packed version (retention 0d: during
// the DELETE) while it rewrites the pack file without it.
func crashRewrite(t *testing.T, c *crashEnv, point string) {
	e, k, a, _ := packed(t, c, "0d")
	// A start that packs batch B too, so every version is packed.
	p := e.StartBinary()
	waitLog(t, p, "pack run files=1", 2)
	p.Stop()
	var victim string
	for u := range a {
		victim = u
		break
	}
	p = e.StartBinary(crashpoint.EnvVar + "=" + point)
	sendUntilDeath(t, e, p, point, "DELETE", "/vcons/"+victim, k.Token, nil)
	a[victim] = nil
	recoverAndCheck(t, e, k.Token, a, true)
}

// crashMove kills storage move-objects, resumes it, and serves from the
// bucket.
func crashMove(t *testing.T, c *crashEnv, point string) {
	e := binaryEnv(t, c, false, "", testenv.Options{})
	k := e.NewKey(e.Tenant("acme"), "write", "read")
	a := acked{}
	p := e.StartBinary()
	storeSome(t, e, k.Token, 4, a)
	p.Stop()
	srv := c.s3(t)
	e.WriteConfig(srv.StorageTOML(t, srv.NewBucket(t, false), "moved/"))
	runKilled(t, e, point, "storage", "move-objects")
	e.CLI("storage", "move-objects")
	recoverAndCheck(t, e, k.Token, a)
}

// crashExport kills an export beside a serving server: the archive is
// untouched, and the next export works.
func crashExport(t *testing.T, c *crashEnv, point string) {
	e := binaryEnv(t, c, false, "", testenv.Options{})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	a := acked{}
	p := e.StartBinary()
	storeSome(t, e, k.Token, 4, a)
	dir := t.TempDir()
	runKilled(t, e, point, "export", "parquet", "--tenant", tenant, "--to", dir)
	verifyAcked(t, e, k.Token, a)
	if out, errOut, code := e.TryCLI("export", "parquet", "--tenant", tenant, "--to", dir); code != 0 {
		t.Fatalf("the export after the kill: %d %s %s", code, out, errOut)
	}
	p.Stop()
	recoverAndCheck(t, e, k.Token, a)
}

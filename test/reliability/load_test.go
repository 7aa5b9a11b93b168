package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/load"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestLoad runs the load generator against an in-process server on the
// data directory: stores, replaces, reads, deletes and purges over 8
// tenants; no request errs and every acknowledged version reads back.
// VCON_SOAK makes it run that long.
func TestLoad(t *testing.T) {
	d, _ := soak(t, 3*time.Second)
	e := testenv.New(t, testenv.Options{})
	rep := runLoad(t, load.Config{URL: e.BaseURL, CAPEM: certPEM(t, e), Tenants: tenants(e, 8), Workers: 16, Duration: d, MaxBody: 32 << 10, MinEach: 3})
	for _, op := range []string{"store", "replace", "read", "delete", "purge"} {
		if rep.Ops[op].Count == 0 {
			t.Errorf("no %s in the mix: %s", op, rep.JSON())
		}
	}
	checkClean(t, e)
}

// TestLoadS3 is TestLoad with the objects in a versitygw bucket.
func TestLoadS3(t *testing.T) {
	d, _ := soak(t, 3*time.Second)
	p := startProxied(t)
	e := testenv.New(t, testenv.Options{Storage: p.storageTOML(t, p.srv.NewBucket(t, false), "load/")})
	runLoad(t, load.Config{URL: e.BaseURL, CAPEM: certPEM(t, e), Tenants: tenants(e, 6), Workers: 12, Duration: d, MaxBody: 32 << 10})
	checkClean(t, e)
}

// TestLoadgenCommand builds scripts/loadgen and runs it as an operator
// would, with the server's configuration, for two seconds: one JSON line,
// exit 0.
func TestLoadgenCommand(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	bin := filepath.Join(t.TempDir(), "loadgen")
	build := exec.Command("go", "build", "-o", bin, "./scripts/loadgen")
	build.Dir = testenv.ModuleRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "-url", e.BaseURL, "-ca", e.Config.TLS.Cert, "-config", e.ConfigPath, "-tenants", "4", "-workers", "4", "-duration", "2s")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("loadgen: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var rep load.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || strings.Count(stdout.String(), "\n") != 1 {
		t.Fatalf("want one JSON line, got %q: %v", stdout.String(), err)
	}
	if rep.Errors != 0 || rep.Lost != 0 || rep.Requests == 0 || rep.Tenants != 4 || rep.Ops["read"].P99 <= 0 {
		t.Fatalf("report %s", stdout.String())
	}

	// -keys with an operator token: the keys file is what key create
	// prints.
	var keys bytes.Buffer
	for i := 0; i < 2; i++ {
		id := e.Tenant("keys-" + string(rune('a'+i)))
		keys.WriteString(e.CLI("key", "create", "--tenant", id, "--scope", "write", "--scope", "read", "--scope", "delete", "--label", "lg"))
	}
	keysFile := filepath.Join(t.TempDir(), "keys.jsonl")
	os.WriteFile(keysFile, keys.Bytes(), 0o600)
	stdout.Reset()
	cmd = exec.CommandContext(ctx, bin, "-url", e.BaseURL, "-ca", e.Config.TLS.Cert, "-keys", keysFile, "-token", e.OperatorKey().Token, "-duration", "1s", "-workers", "2")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("loadgen -keys: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || rep.Errors != 0 || rep.Ops["purge"].Count+rep.Ops["delete"].Count == 0 {
		t.Fatalf("loadgen -keys report %q: %v", stdout.String(), err)
	}

	// Never anything but loopback.
	out, err := exec.CommandContext(ctx, bin, "-url", "https://192.0.2.1:8443", "-ca", e.Config.TLS.Cert, "-config", e.ConfigPath, "-duration", "1s").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not on loopback") {
		t.Fatalf("a non-loopback server: %v %s", err, out)
	}
}

// Package s3test starts real S3 servers (versitygw, MinIO) on loopback with
// TLS for tests. The binaries are installed by scripts/install-test-tools.sh
// and are run as external programs only (MinIO is AGPL: never imported).
//
// A test that should pass on every server runs its body per kind:
//
//	s3test.ForEach(t, func(t *testing.T, srv *s3test.Server) { ... })
//
// or starts one kind by name with Start(t, "versitygw").
package s3test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/s3sig"
	"github.com/vcon-server/vcon-server/test/kit/testcert"
	"github.com/vcon-server/vcon-server/test/kit/toolbin"

	"github.com/vcon-server/vcon-server/test/kit/freeport"
)

// Kinds are the servers every S3 test runs on.
var Kinds = []string{"versitygw", "minio"}

// envBinary names, per kind, the variable that points at its binary.
var envBinary = map[string]string{
	"versitygw": "VCON_TEST_VERSITYGW",
	"minio":     "VCON_TEST_MINIO",
}

// Server is one running S3 server.
type Server struct {
	Kind      string
	Endpoint  string // https://127.0.0.1:PORT
	Region    string
	AccessKey string
	SecretKey string
	CAFile    string // PEM of the CA that signed the server's certificate
	CAPEM     []byte
	DataDir   string
	LogFile   string // the server's output

	cmd     *exec.Cmd
	buckets atomic.Int64
	suffix  string
}

// ToolsDir is where scripts/install-test-tools.sh installs binaries:
// $VCON_TOOLS/bin, by default ~/.cache/vcon-server/tools/bin.
func ToolsDir() string { return toolbin.Dir() }

// Binary finds kind's program: the environment variable (VCON_TEST_MINIO,
// VCON_TEST_VERSITYGW), else the tools directory, else PATH. It returns ""
// when there is none.
func Binary(kind string) string { return toolbin.Find(kind, envBinary[kind]) }

// ForEach runs fn in a subtest per kind of Kinds, each with its own server.
func ForEach(t *testing.T, fn func(t *testing.T, srv *Server)) {
	t.Helper()
	for _, kind := range Kinds {
		t.Run(kind, func(t *testing.T) {
			fn(t, Start(t, kind))
		})
	}
}

// Start runs a server of kind ("versitygw" or "minio") until the test
// ends. Without its binary the test is skipped, loudly, or fails when
// CI=true: CI must never pass by skipping its real-server tests.
func Start(t testing.TB, kind string) *Server {
	t.Helper()
	if _, ok := envBinary[kind]; !ok {
		t.Fatalf("s3test: unknown server kind %q (want one of %v)", kind, Kinds)
	}
	bin := toolbin.Require(t, kind, envBinary[kind])

	dir := t.TempDir()
	pair, err := testcert.New("vcon-server test CA")
	caPEM, certPEM, keyPEM := pair.CAPEM, pair.CertPEM, pair.KeyPEM
	if err != nil {
		t.Fatalf("s3test: certificates: %v", err)
	}
	s := &Server{
		Kind:      kind,
		Region:    "us-east-1",
		AccessKey: "vcontest",
		SecretKey: toolbin.RandomHex(20),
		CAFile:    filepath.Join(dir, "ca.pem"),
		CAPEM:     caPEM,
		DataDir:   filepath.Join(dir, "data"),
		LogFile:   filepath.Join(dir, kind+".log"),
		suffix:    toolbin.RandomHex(4),
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("s3test: %v", err)
		}
	}
	must(os.WriteFile(s.CAFile, caPEM, 0o600))
	must(os.MkdirAll(s.DataDir, 0o700))

	// A port taken between picking and listening makes the server exit at
	// once; try again on another.
	var lastErr error
	for try := 0; try < 3; try++ {
		lastErr = s.start(t, bin, dir, certPEM, keyPEM)
		if lastErr == nil {
			return s
		}
	}
	log, _ := os.ReadFile(s.LogFile)
	t.Fatalf("s3test: %s did not start: %v\n--- %s ---\n%s", kind, lastErr, s.LogFile, log)
	return nil
}

func (s *Server) start(t testing.TB, bin, dir string, certPEM, keyPEM []byte) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	s.Endpoint = "https://" + addr

	var cmd *exec.Cmd
	env := os.Environ()
	switch s.Kind {
	case "versitygw":
		cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		if err := os.WriteFile(cert, certPEM, 0o600); err != nil {
			return err
		}
		if err := os.WriteFile(key, keyPEM, 0o600); err != nil {
			return err
		}
		vdir := filepath.Join(dir, "versions")
		if err := os.MkdirAll(vdir, 0o700); err != nil {
			return err
		}
		// --keep-alive: without it every request opens a new TLS
		// connection and the gateway is several times slower.
		cmd = exec.Command(bin, "--port", addr, "--cert", cert, "--key", key,
			"--keep-alive", "--quiet", "posix", "--versioning-dir", vdir, s.DataDir)
		env = append(env, "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
	case "minio":
		certs := filepath.Join(dir, "certs")
		if err := os.MkdirAll(certs, 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(certs, "public.crt"), certPEM, 0o600); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(certs, "private.key"), keyPEM, 0o600); err != nil {
			return err
		}
		console, err := freePort()
		if err != nil {
			return err
		}
		cmd = exec.Command(bin, "server", s.DataDir, "--address", addr,
			"--console-address", "127.0.0.1:"+strconv.Itoa(console), "--certs-dir", certs, "--quiet")
		env = append(env, "MINIO_ROOT_USER="+s.AccessKey, "MINIO_ROOT_PASSWORD="+s.SecretKey,
			"MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_CI_CD=1")
	}
	logf, err := os.OpenFile(s.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); logf.Close() }()

	if err := s.waitReady(exited); err != nil {
		cmd.Process.Kill()
		<-exited
		return err
	}
	s.cmd = cmd
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			if log, err := os.ReadFile(s.LogFile); err == nil && len(log) > 0 {
				t.Logf("--- %s output (%s) ---\n%s", s.Kind, s.LogFile, toolbin.Tail(log, 8<<10))
			}
		}
	})
	return nil
}

// waitReady polls until the server answers a signed request (a listing of
// buckets), so the first test request never races its start-up.
func (s *Server) waitReady(exited <-chan error) error {
	c, err := s.newClient()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("the server exited: %v", err)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := c.Ping(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer within 60s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *Server) newClient() (*s3sig.Client, error) {
	return s3sig.New(s3sig.Config{
		Endpoint:    s.Endpoint,
		Region:      s.Region,
		Credentials: s3sig.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey},
		PathStyle:   true,
		CAPEM:       s.CAPEM,
		MaxRetries:  -1,
	})
}

// Client returns a client for the server: path style, its CA, its root
// keys, default retries.
func (s *Server) Client(t testing.TB) *s3sig.Client {
	t.Helper()
	return s.ClientAt(t, s.Endpoint, s.CAPEM)
}

// ClientAt is Client reaching the server through endpoint (a proxy in
// front of it) whose certificate caPEM signs.
func (s *Server) ClientAt(t testing.TB, endpoint string, caPEM []byte) *s3sig.Client {
	t.Helper()
	c, err := s3sig.New(s3sig.Config{
		Endpoint:    endpoint,
		Region:      s.Region,
		Credentials: s3sig.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey},
		PathStyle:   true,
		CAPEM:       caPEM,
	})
	if err != nil {
		t.Fatalf("s3test: client: %v", err)
	}
	return c
}

// NewBucket makes a fresh, empty bucket with a name no other call used,
// with versioning on if asked.
func (s *Server) NewBucket(t testing.TB, versioned bool) string {
	t.Helper()
	return s.newBucket(t, versioned, false)
}

// NewLockedBucket makes a fresh bucket with Object Lock on (and so
// versioning), as a bucket the server must refuse for Parquet storage.
func (s *Server) NewLockedBucket(t testing.TB) string {
	t.Helper()
	return s.newBucket(t, false, true)
}

func (s *Server) newBucket(t testing.TB, versioned, locked bool) string {
	t.Helper()
	name := fmt.Sprintf("vcon-test-%s-%d", s.suffix, s.buckets.Add(1))
	c := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.CreateBucket(ctx, name, s3sig.CreateBucketOptions{ObjectLock: locked}); err != nil {
		t.Fatalf("s3test: create bucket on %s: %v", s.Kind, err)
	}
	if versioned {
		if err := c.PutBucketVersioning(ctx, name, s3sig.VersioningEnabled); err != nil {
			t.Fatalf("s3test: turn versioning on, on %s: %v", s.Kind, err)
		}
	}
	return name
}

func freePort() (int, error) { return freeport.Port() }

// StorageTOML is the [storage] tables of a server keeping its objects in
// bucket under prefix on s, with the secret key in a file of its own.
func (s *Server) StorageTOML(t testing.TB, bucket, prefix string) string {
	t.Helper()
	secret := filepath.Join(t.TempDir(), "s3.secret")
	if err := os.WriteFile(secret, []byte(s.SecretKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`
[storage]
objects = "s3"

[storage.s3]
endpoint = %q
region = %q
bucket = %q
prefix = %q
path_style = true
access_key_id = %q
secret_access_key_file = %q
ca_file = %q
`, s.Endpoint, s.Region, bucket, prefix, s.AccessKey, secret, s.CAFile)
}

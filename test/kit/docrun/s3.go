package docrun

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/vcon-server/vcon-server/test/kit/testcert"

	"github.com/vcon-server/vcon-server/test/kit/freeport"
)

// S3 is the S3 service a page reaches as objects.example.com:9000: a real
// versitygw on loopback with TLS from a CA of its own.
//
// It is started here rather than with test/kit/s3test because the pages
// sign as the access key "vcon-server",
// while s3test's servers have a fixed test key. The binary is the one
// s3test finds (scripts/install-test-tools.sh).
type S3 struct {
	Port      int
	AccessKey string
	SecretKey string
	CAPEM     []byte
	cmd       *exec.Cmd
	exited    chan error
	log       string
}

// S3AccessKey is the access key id the pages use.
const S3AccessKey = "vcon-server"

// StartS3 runs versitygw (binary bin) with its data under dir.
func StartS3(bin, dir string) (*S3, error) {
	pair, err := testcert.New("docs runner S3 CA")
	caPEM, certPEM, keyPEM := pair.CAPEM, pair.CertPEM, pair.KeyPEM
	if err != nil {
		return nil, err
	}
	secret := make([]byte, 20)
	rand.Read(secret)
	s := &S3{AccessKey: S3AccessKey, SecretKey: hex.EncodeToString(secret), CAPEM: caPEM, log: filepath.Join(dir, "versitygw.log")}
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for _, d := range []string{filepath.Join(dir, "data"), filepath.Join(dir, "versions")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(cert, certPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(key, keyPEM, 0o600); err != nil {
		return nil, err
	}
	// A port taken between choosing it and listening makes versitygw exit
	// at once: try another.
	for try := 0; ; try++ {
		if err = s.start(bin, dir, cert, key); err == nil || try == 2 {
			return s, err
		}
	}
}

func (s *S3) start(bin, dir, cert, key string) error {
	var err error
	if s.Port, err = freeport.Port(); err != nil {
		return err
	}
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	// --keep-alive: without it every request opens a new TLS connection.
	// --versioning-dir: without it no bucket can have versioning, and the
	// pages show the server refusing one that has.
	cmd := exec.Command(bin, "--port", "127.0.0.1:"+strconv.Itoa(s.Port), "--cert", cert, "--key", key,
		"--keep-alive", "--quiet", "posix", "--versioning-dir", filepath.Join(dir, "versions"), filepath.Join(dir, "data"))
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	s.cmd = cmd
	s.exited = make(chan error, 1)
	go func() { s.exited <- cmd.Wait(); logf.Close() }()

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CAPEM)
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-s.exited:
			b, _ := os.ReadFile(s.log)
			return fmt.Errorf("versitygw exited at start: %v\n%s", err, b)
		default:
		}
		// Any HTTP answer, even 403 to an unsigned request, means it serves.
		if resp, err := client.Get("https://localhost:" + strconv.Itoa(s.Port) + "/"); err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("versitygw did not answer in 60 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop ends versitygw.
func (s *S3) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		<-s.exited
		s.cmd = nil
	}
}

// Log is versitygw's output, for a failure's report.
func (s *S3) Log() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}

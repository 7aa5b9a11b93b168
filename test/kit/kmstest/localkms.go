package kmstest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/config"
	"github.com/vcon-server/vcon-server/internal/s3sig"
	"github.com/vcon-server/vcon-server/test/kit/tlsproxy"
	"github.com/vcon-server/vcon-server/test/kit/toolbin"
)

// AWS is one running local-kms behind a TLS proxy, and a symmetric key
// made on it. local-kms checks no signature and no key policy: a test of
// denied access needs a real AWS account.
type AWS struct {
	Endpoint    string // https://127.0.0.1:PORT, the TLS proxy
	CAFile      string // PEM of the proxy's CA
	Region      string
	AccessKeyID string
	SecretFile  string // the secret access key, in a 0600 file
	KeyID       string // the key StartLocalKMS made

	CAPEM    []byte
	Upstream string // http://127.0.0.1:PORT, local-kms itself (plain HTTP)
	LogFile  string // local-kms's output

	secret string
	signer *s3sig.Signer
	client *http.Client
	cmd    *exec.Cmd
	exited chan error
}

// StartLocalKMS runs local-kms with its data in a temporary folder until
// the test ends, behind tlsproxy (vcon-server reaches a KMS over https
// only), and makes a symmetric key, KeyID.
//
// local-kms listens on every interface (it takes a port, not an address):
// it holds only the throwaway keys of one test.
func StartLocalKMS(t testing.TB) *AWS {
	t.Helper()
	bin := toolbin.Require(t, "local-kms", "VCON_TEST_LOCALKMS")
	dir := t.TempDir()
	a := &AWS{
		Region:      "eu-west-1",
		AccessKeyID: "AKIAVCONTEST",
		SecretFile:  filepath.Join(dir, "aws.secret"),
		CAFile:      filepath.Join(dir, "ca.pem"),
		LogFile:     filepath.Join(dir, "local-kms.log"),
		secret:      toolbin.RandomHex(20),
	}
	if err := os.WriteFile(a.SecretFile, []byte(a.secret+"\n"), 0o600); err != nil {
		t.Fatalf("kmstest: %v", err)
	}
	if err := a.start(t, bin, dir); err != nil {
		log, _ := os.ReadFile(a.LogFile)
		t.Fatalf("kmstest: local-kms did not start: %v\n--- %s ---\n%s", err, a.LogFile, log)
	}
	px := tlsproxy.Start(t, a.Upstream, nil)
	a.Endpoint, a.CAPEM = px.URL, px.CAPEM
	if err := os.WriteFile(a.CAFile, a.CAPEM, 0o600); err != nil {
		t.Fatalf("kmstest: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(a.CAPEM)
	a.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: pool}}}
	a.signer = &s3sig.Signer{
		Credentials:   s3sig.Credentials{AccessKeyID: a.AccessKeyID, SecretAccessKey: a.secret},
		Region:        a.Region,
		Service:       "kms",
		NormalizePath: true,
	}
	a.KeyID = a.CreateKey(t)
	return a
}

// startedOn is local-kms's log line that names the port it took.
var startedOn = regexp.MustCompile(`Local KMS started on [0-9.]*:([0-9]+)`)

// start runs local-kms on a port of the kernel's choosing (PORT=0) and
// reads which from its log, so no port is picked first and lost to a race.
func (a *AWS) start(t testing.TB, bin, dir string) error {
	logf, err := os.OpenFile(a.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin)
	cmd.Env = []string{
		"PORT=0",
		"KMS_REGION=" + a.Region,
		"KMS_ACCOUNT_ID=111122223333",
		"KMS_DATA_PATH=" + filepath.Join(dir, "data"),
		"KMS_SEED_PATH=" + filepath.Join(dir, "no-seed.yaml"),
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	a.cmd, a.exited = cmd, make(chan error, 1)
	go func() { a.exited <- cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		a.kill()
		if t.Failed() {
			if log, err := os.ReadFile(a.LogFile); err == nil && len(log) > 0 {
				t.Logf("--- local-kms output (%s) ---\n%s", a.LogFile, log)
			}
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		log, _ := os.ReadFile(a.LogFile)
		if m := startedOn.FindSubmatch(log); m != nil {
			a.Upstream = "http://127.0.0.1:" + string(m[1])
			return nil
		}
		select {
		case err := <-a.exited:
			a.exited <- err
			return fmt.Errorf("local-kms exited: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no port in its log within 30s")
		}
	}
}

// Stop kills local-kms; the proxy stays, and answers 502 from then on, as
// a load balancer in front of a KMS that is down does.
func (a *AWS) Stop(t testing.TB) {
	t.Helper()
	a.kill()
}

func (a *AWS) kill() {
	if a.cmd == nil {
		return
	}
	a.cmd.Process.Kill()
	err := <-a.exited
	a.exited <- err // a second kill finds it exited
}

// Config is the [kms] table of the key id keyID ("" for KeyID), with the
// defaults of the keys TOML leaves out.
func (a *AWS) Config(keyID string) *config.KMS {
	if keyID == "" {
		keyID = a.KeyID
	}
	return &config.KMS{Provider: "awskms", KeyCache: 300 * time.Second, TenantKeys: "master", AWSKMS: &config.AWSKMS{
		Region: a.Region, KeyID: keyID, Endpoint: a.Endpoint,
		AccessKeyID: a.AccessKeyID, SecretAccessKeyFile: a.SecretFile, CAFile: a.CAFile,
	}}
}

// TOML is the [kms] tables of Config(""), for a configuration file.
func (a *AWS) TOML() string {
	return fmt.Sprintf(`
[kms]
provider = "awskms"

[kms.awskms]
region = %q
key_id = %q
endpoint = %q
access_key_id = %q
secret_access_key_file = %q
ca_file = %q
`, a.Region, a.KeyID, a.Endpoint, a.AccessKeyID, a.SecretFile, a.CAFile)
}

// CreateKey makes another symmetric key and returns its id.
func (a *AWS) CreateKey(t testing.TB) string {
	t.Helper()
	var out struct{ KeyMetadata struct{ KeyId string } }
	a.call(t, "CreateKey", map[string]string{"KeySpec": "SYMMETRIC_DEFAULT", "KeyUsage": "ENCRYPT_DECRYPT"}, &out)
	if out.KeyMetadata.KeyId == "" {
		t.Fatal("kmstest: CreateKey answered no key id")
	}
	return out.KeyMetadata.KeyId
}

// Disable disables keyID: Encrypt and Decrypt answer DisabledException.
func (a *AWS) Disable(t testing.TB, keyID string) {
	t.Helper()
	a.call(t, "DisableKey", map[string]string{"KeyId": keyID}, nil)
}

// Enable enables keyID again.
func (a *AWS) Enable(t testing.TB, keyID string) {
	t.Helper()
	a.call(t, "EnableKey", map[string]string{"KeyId": keyID}, nil)
}

// ScheduleDeletion schedules keyID's deletion in 7 days, the shortest
// window: from now on it answers KMSInvalidStateException.
func (a *AWS) ScheduleDeletion(t testing.TB, keyID string) {
	t.Helper()
	a.call(t, "ScheduleKeyDeletion", map[string]any{"KeyId": keyID, "PendingWindowInDays": 7}, nil)
}

// CancelDeletion cancels a scheduled deletion; the key is then disabled,
// as AWS leaves it, until Enable.
func (a *AWS) CancelDeletion(t testing.TB, keyID string) {
	t.Helper()
	a.call(t, "CancelKeyDeletion", map[string]string{"KeyId": keyID}, nil)
}

// call makes one signed JSON 1.1 call through the proxy, retrying while
// local-kms is starting, and fails the test on an error answer.
func (a *AWS) call(t testing.TB, target string, in, out any) {
	t.Helper()
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, a.Endpoint+"/", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		req.Header.Set("X-Amz-Target", "TrentService."+target)
		a.signer.Sign(req, hex.EncodeToString(sum[:]), time.Now())
		resp, err := a.client.Do(req)
		if err == nil {
			answer, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			switch {
			case rerr != nil:
				err = rerr
			case resp.StatusCode == http.StatusBadGateway:
				err = fmt.Errorf("502 from the proxy: local-kms is not answering")
			case resp.StatusCode != http.StatusOK:
				t.Fatalf("kmstest: local-kms %s: %d %s", target, resp.StatusCode, answer)
			case out != nil:
				if err := json.Unmarshal(answer, out); err != nil {
					t.Fatalf("kmstest: local-kms %s: %v in %s", target, err, answer)
				}
				return
			default:
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("kmstest: local-kms %s: %v", target, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

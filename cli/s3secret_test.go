package cli_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vcon-server/vcon-server/cli"
	"github.com/vcon-server/vcon-server/internal/config"
)

// TestS3SecretFileMode: a secret key file that group or others may use is
// refused, as the master key file is, naming the key and the file and
// saying what to do; 0600 and 0400 are accepted.
func TestS3SecretFileMode(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "s3.secret")
	if err := os.WriteFile(secret, []byte("the secret key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &config.S3{Endpoint: "https://localhost:9000", Region: "us-east-1", Bucket: "b", AccessKeyID: "vcon-server", SecretAccessKeyFile: secret, PathStyle: true}
	for _, tt := range []struct {
		table string
		mode  os.FileMode
		want  string
	}{
		{"storage.s3", 0o600, ""},
		{"storage.s3", 0o400, ""},
		{"export.s3", 0o600, ""},
		{"storage.s3", 0o644, "configuration: storage.s3.secret_access_key_file: " + secret + " is readable by group or others (mode 0644); run: chmod 0600 " + secret + " (or 0400)"},
		{"export.s3", 0o644, "configuration: export.s3.secret_access_key_file: " + secret + " is readable by group or others (mode 0644); run: chmod 0600 " + secret + " (or 0400)"},
		{"storage.s3", 0o640, "configuration: storage.s3.secret_access_key_file: " + secret + " is readable by group or others (mode 0640); run: chmod 0600 " + secret + " (or 0400)"},
		{"storage.s3", 0o604, "configuration: storage.s3.secret_access_key_file: " + secret + " is readable by group or others (mode 0604); run: chmod 0600 " + secret + " (or 0400)"},
		{"storage.s3", 0o620, "configuration: storage.s3.secret_access_key_file: " + secret + " is writable or executable by group or others (mode 0620); run: chmod 0600 " + secret + " (or 0400)"},
	} {
		if err := os.Chmod(secret, tt.mode); err != nil {
			t.Fatal(err)
		}
		_, err := cli.NewS3Client(tt.table, c)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%s, mode %04o:\ngot  %s\nwant %s", tt.table, tt.mode, got, tt.want)
		}
	}

	if err := os.Mkdir(filepath.Join(dir, "folder"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"absent.secret": "configuration: storage.s3.secret_access_key_file: " + dir + "/absent.secret cannot be read: no such file or directory",
		"folder":        "configuration: storage.s3.secret_access_key_file: " + dir + "/folder is a folder, not a file",
	} {
		c := *c
		c.SecretAccessKeyFile = filepath.Join(dir, name)
		if _, err := cli.NewS3Client("storage.s3", &c); err == nil || err.Error() != want {
			t.Errorf("got  %v\nwant %s", err, want)
		}
	}
}

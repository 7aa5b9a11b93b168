package export_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vcon-server/vcon-server/export"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// Each refusal exits 1, says why on standard error in one line, prints
// nothing on standard output, and writes nothing: no file in the target,
// no audit record, no scratch folder left.
func TestExportRefusals(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	d := storeEveryForm(t, e, "acme", 1)
	dir := t.TempDir()
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--tenant", "acme", "--to", dir, "--since", "yesterday"},
			`"yesterday" is not an RFC 3339 time such as 2026-11-05T00:00:00Z`},
		{[]string{"--tenant", "acme", "--to", dir, "--until", "2026-11-05"},
			`"2026-11-05" is not an RFC 3339 time such as 2026-11-05T00:00:00Z`},
		{[]string{"--tenant", "acme", "--to", dir, "--since", "2026-11-06T00:00:00Z", "--until", "2026-11-05T00:00:00Z"},
			"--since 2026-11-06T00:00:00Z is not before --until 2026-11-05T00:00:00Z"},
		{[]string{"--tenant", "acme", "--to", dir, "--since", "2026-11-05T00:00:00Z", "--until", "2026-11-05T00:00:00Z"},
			"--since 2026-11-05T00:00:00Z is not before --until 2026-11-05T00:00:00Z"},
		{[]string{"--tenant", "nope", "--to", dir},
			`no tenant has the id or name "nope"; vcon-server tenant list shows them`},
		{[]string{"--to", dir},
			"export parquet needs --tenant T, the tenant's id or name"},
		{[]string{"--tenant", "acme"},
			"export parquet needs --to, an absolute directory or s3://bucket/prefix/"},
		{[]string{"--tenant", "acme", "--to", "exports"},
			"--to exports is neither an absolute directory nor s3://bucket/prefix/"},
		{[]string{"--tenant", "acme", "--to", missing},
			"--to " + missing + ": the directory does not exist; make it first, writable by the account that runs the export (install -d -m 0700 -o vcon -g vcon " + missing + ")"},
		{[]string{"--tenant", "acme", "--to", file},
			"--to " + file + " is not a directory"},
		{[]string{"--tenant", "acme", "--to", "s3://vcon-exports/daily"},
			`--to s3://vcon-exports/daily: the prefix must end with "/", as in s3://vcon-exports/daily/`},
		{[]string{"--tenant", "acme", "--to", "s3://Vcon_Exports/"},
			`--to s3://Vcon_Exports/: "Vcon_Exports" is not a bucket name (3 to 63 lowercase letters, digits, dots and hyphens); write s3://bucket/prefix/`},
		{[]string{"--tenant", "acme", "--to", "s3://vcon-exports/a//b/"},
			`--to s3://vcon-exports/a//b/: the prefix "a//b/" has an empty, "." or ".." part`},
		{[]string{"--tenant", "acme", "--to", dir, "--purpose", "Marketing"},
			`--purpose "Marketing" is not 1 to 64 characters of a-z, 0-9 and _: name it as the vCons' purpose_grants do`},
		{[]string{"--tenant", "acme", "--to", "s3://vcon-exports/"},
			"an export to a bucket needs [export.s3] in the configuration, or [storage.s3], whose service and keys it then uses"},
	}
	for _, c := range cases {
		out, errOut, code := e.TryCLI(append([]string{"export", "parquet"}, c.args...)...)
		if code != 1 || out != "" || errOut != "vcon-server: "+c.want+"\n" {
			t.Errorf("export parquet %s:\nexit %d, stdout %q, stderr %q\nwant exit 1, stderr %q", strings.Join(c.args, " "), code, out, errOut, "vcon-server: "+c.want+"\n")
		}
	}
	if got := filesUnder(t, dir); len(got) != 0 {
		t.Errorf("refused exports wrote %v", got)
	}
	if strings.Contains(e.CLI("audit", "export", "--tenant", d.Tenant), `"action":"export"`) {
		t.Error("a refused export is in the audit log")
	}
	if entries, _ := os.ReadDir(objstore.SpoolDir(e.Config.DataDir)); len(entries) != 0 {
		t.Errorf("refused exports left scratch folders: %v", entries)
	}
}

// A directory this account may not write in is refused before anything is
// written. Root may write anywhere, so as root the check runs in a copy of
// this test binary started as the user nobody.
func TestExportRefusesAnUnwritableDirectory(t *testing.T) {
	dir, err := os.MkdirTemp("", "vcon-export-readonly-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	want := "--to " + dir + ": this account may not write in the directory (permission denied); run the export as the account that owns it, or choose another directory"
	if os.Geteuid() != 0 {
		if _, err := export.OpenDir(dir); err == nil || err.Error() != want {
			t.Errorf("OpenDir: %v, want %q", err, want)
		}
		return
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyBin := filepath.Join(dir, "export.test")
	os.Chmod(dir, 0o755)
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyBin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o555)
	cmd := exec.Command(copyBin, "-test.run=^$")
	cmd.Env = append(os.Environ(), openDirEnv+"="+dir)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the check as nobody: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != want {
		t.Errorf("OpenDir as nobody: %q, want %q", got, want)
	}
}

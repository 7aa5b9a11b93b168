package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/cli"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// runToFiles runs a command with its output and error output in files,
// as a script or a unit's log has them: real files, not terminals.
func runToFiles(t *testing.T, e *testenv.Env, args ...string) (string, string, int) {
	t.Helper()
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	errOut, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errOut.Close()
	code := cli.Main(context.Background(), append(args, "--config", e.ConfigPath), out, errOut)
	o, _ := os.ReadFile(out.Name())
	eo, _ := os.ReadFile(errOut.Name())
	return string(o), string(eo), code
}

// TestLongCommandsQuietOffATerminal: the commands that show a progress
// line on a terminal (check, check --deep, export parquet, storage
// move-objects, master-key rotate) print nothing more than their own
// lines when their error output is a file.
func TestLongCommandsQuietOffATerminal(t *testing.T) {
	srv := s3test.Start(t, "versitygw")
	e := testenv.New(t, testenv.Options{})
	k := e.NewKey(e.Tenant("acme"), "write", "read")
	for i := 0; i < 5; i++ {
		u := ids.NewRandom().String()
		if r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(u, "quiet", "+15555550100"), "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("POST: %d", r.Status)
		}
	}
	e.Stop()

	quiet := func(want string, args ...string) {
		t.Helper()
		out, errOut, code := runToFiles(t, e, args...)
		if code != 0 || errOut != "" || !strings.Contains(out, want) || strings.Contains(out, "\r") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 0, %s on stdout, nothing on stderr",
				strings.Join(args, " "), code, out, errOut, want)
		}
	}
	quiet(`"versions":5,"objects":5`, "check")
	quiet(`"versions":5,"objects":5`, "check", "--deep")
	quiet(`"rows":5`, "export", "parquet", "--tenant", "acme", "--to", t.TempDir())

	e.WriteConfig(srv.StorageTOML(t, srv.NewBucket(t, false), "site/"))
	quiet(`"moved":5`, "storage", "move-objects")

	newKey := filepath.Join(e.Dir, "new.key")
	if err := os.WriteFile(newKey, make([]byte, 32), 0o400); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runToFiles(t, e, "master-key", "rotate", "--new", newKey)
	if code != 0 || out != `{"new_key":"`+newKey+`","rotated":1}`+"\n" ||
		!regexp.MustCompile(`\Avcon-server: rotated 1 tenant key\(s\); [^\r\n]*\n\z`).MatchString(errOut) {
		t.Errorf("master-key rotate: exit %d, stdout %q, stderr %q; want its result and its one line", code, out, errOut)
	}
}

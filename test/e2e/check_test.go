package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

type checkLine struct {
	Name     string
	ID       string
	Versions int
	Objects  int
	Packed   int
	Damaged  []string
	Problems []string
}

func runCheck(t *testing.T, e *testenv.Env, args ...string) ([]checkLine, string, int) {
	out, errOut, code := e.TryCLI(append([]string{"check"}, args...)...)
	var lines []checkLine
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" || strings.HasPrefix(l, `{"replica":`) || strings.HasPrefix(l, `{"admin_log":`) {
			continue // the last lines: the admin log, and the catalog's replica or the warning that there is none
		}
		var c checkLine
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		lines = append(lines, c)
	}
	return lines, errOut, code
}

// TestCheck: clean when nothing is wrong; a missing object and one of the
// wrong length are damaged; a flipped byte at the right length is found by
// --deep only; check refuses while a server runs.
func TestCheck(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	k := e.NewKey(e.Tenant("acme"), "write")
	var versions []string
	for i := 0; i < 4; i++ {
		u := ids.NewRandom().String()
		r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(u, "check", "+15555550100"), "Content-Type", "application/vcon")
		var st struct{ Version string }
		r.JSON(t, &st)
		versions = append(versions, st.Version)
	}
	if _, errOut, code := e.TryCLI("check"); code != 1 || !strings.Contains(errOut, "runs only while the server is stopped") {
		t.Fatalf("check beside a server: %d %s", code, errOut)
	}
	e.Stop()
	lines, errOut, code := runCheck(t, e, "--deep")
	if code != 0 || len(lines) != 1 || lines[0].Versions != 4 || lines[0].Objects != 4 || len(lines[0].Damaged) != 0 {
		t.Fatalf("clean check: %d %+v %s", code, lines, errOut)
	}
	obj := func(v string) string {
		return filepath.Join(e.Config.DataDir, "objects", lines[0].ID, v)
	}
	os.Remove(obj(versions[0]))
	os.Truncate(obj(versions[1]), 10)
	b, _ := os.ReadFile(obj(versions[2]))
	b[len(b)-20] ^= 1
	os.Chmod(obj(versions[2]), 0o600)
	if err := os.WriteFile(obj(versions[2]), b, 0o600); err != nil {
		t.Fatal(err)
	}
	lines, _, code = runCheck(t, e)
	if code != 1 || strings.Join(lines[0].Damaged, " ") != versions[0]+" "+versions[1] {
		t.Fatalf("plain check: %d %+v", code, lines)
	}
	lines, errOut, code = runCheck(t, e, "--deep")
	if code != 1 || strings.Join(lines[0].Damaged, " ") != strings.Join(versions[:3], " ") {
		t.Fatalf("deep check: %d %+v", code, lines)
	}
	if !strings.Contains(errOut, "check found 3 damaged version(s)") {
		t.Fatalf("deep check error: %s", errOut)
	}
}

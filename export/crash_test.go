package export_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/test/kit/duckdbtest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// An export killed part way (SIGKILL at its crash points, in the real
// binary, beside a serving server) leaves no manifest and no partial file
// under a final name: every part file left is whole. It records nothing in
// the audit log, and takes no manifest number: the next export is seq 1.
// The next export also removes the scratch folders the killed ones left.
func TestExportKilled(t *testing.T) {
	duckdbtest.Path(t)
	e := testenv.New(t, testenv.Options{})
	d := storeEveryForm(t, e, "acme", 3)
	e.CLI("tenant", "set-metadata", d.Tenant, "full")
	want := keptVersions(t, e, d.Tenant)
	bin := testenv.Binary(t)
	dir := t.TempDir()

	for _, point := range []string{crashpoint.ExportAfterFile, crashpoint.ExportBeforeManifest} {
		cmd := exec.Command(bin, "export", "parquet", "--tenant", d.Tenant, "--to", dir, "--config", e.ConfigPath)
		cmd.Env = append(os.Environ(), crashpoint.EnvVar+"="+point)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("%s: the export was not killed: %v\n%s", point, err, out)
		}
		if strings.TrimSpace(string(out)) != "" {
			t.Errorf("%s: a killed export printed %q", point, out)
		}
	}

	files := filesUnder(t, dir)
	if len(files) != 2 {
		t.Fatalf("after two killed exports: %v, want one part file each", files)
	}
	for _, f := range files {
		if !partName.MatchString(f) {
			t.Errorf("%s is not a whole part file's name (no manifest, no temporary file may be left)", f)
			continue
		}
		rows := duckdbtest.Query(t, "SELECT count(*) FROM read_parquet("+sqlString(filepath.Join(dir, f))+")")
		if rows[1][0] != strconv.Itoa(len(want)) {
			t.Errorf("%s holds %s rows, want %d", f, rows[1][0], len(want))
		}
	}
	if n := exportRecords(t, e, d.Tenant); n != 0 {
		t.Errorf("%d export records of killed exports", n)
	}
	spool := objstore.SpoolDir(e.Config.DataDir)
	// Each export removes the scratch folders of dead ones before it
	// starts: the second killed export removed the first's.
	if entries, _ := os.ReadDir(spool); len(entries) != 1 {
		t.Errorf("the last killed export should have left its scratch folder: %v", entries)
	}
	// The next start of the server removes it too.
	e.Restart()
	if entries, _ := os.ReadDir(spool); len(entries) != 0 {
		t.Errorf("scratch folders left after a start: %v", entries)
	}

	r := exportCLI(t, e, "--tenant", d.Tenant, "--to", dir)
	if r.Seq != 1 || r.Rows != int64(len(want)) {
		t.Fatalf("the export after the kills: %+v", r)
	}
	m := readManifest(t, dir, r.Manifest)
	for _, f := range m.Files {
		for _, old := range files {
			if f.Path == old {
				t.Errorf("the manifest names %s, a file of a killed export", old)
			}
		}
	}
	if entries, _ := os.ReadDir(spool); len(entries) != 0 {
		t.Errorf("scratch folders left after the next export: %v", entries)
	}
}

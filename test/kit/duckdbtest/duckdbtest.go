// Package duckdbtest runs real DuckDB from tests: the command-line stand-in
// that scripts/install-duckdb.sh installs (DuckDB 1.5.6 through its Node
// library), or a DuckDB command-line program named by VCON_TEST_DUCKDB.
//
// A test that needs DuckDB and finds none is skipped, loudly, naming the
// script that installs it; on CI (CI=true) it fails instead, so the suites
// that read Parquet files with DuckDB are never skipped there in silence.
package duckdbtest

import (
	"bytes"
	"encoding/csv"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// EnvPath names the environment variable that, when set, gives the DuckDB
// program to run.
const EnvPath = "VCON_TEST_DUCKDB"

const installHint = "install it with scripts/install-duckdb.sh (npm, about 70 MB, outside the repository), or set " + EnvPath + " to a duckdb program"

// toolsDir is where scripts/install-duckdb.sh installs: $VCON_TOOLS, or
// ~/.cache/vcon-server/tools.
func toolsDir() string {
	if d := os.Getenv("VCON_TOOLS"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".cache", "vcon-server", "tools")
}

// find looks for the duckdb program: $VCON_TEST_DUCKDB, the tools
// directory, then PATH.
func find() (string, error) {
	if p := os.Getenv(EnvPath); p != "" {
		if err := executable(p); err != nil {
			return "", errors.New(EnvPath + "=" + p + ": " + err.Error())
		}
		return p, nil
	}
	if d := toolsDir(); d != "" {
		p := filepath.Join(d, "bin", "duckdb")
		if executable(p) == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("duckdb"); err == nil {
		return p, nil
	}
	return "", errors.New("no duckdb program found")
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return &fs.PathError{Op: "run", Path: p, Err: errors.New("not an executable file")}
	}
	return nil
}

// Path returns the duckdb program to run. Without one, the test is skipped
// with a message that says how to install it, or fails when CI is "true".
func Path(t testing.TB) string {
	t.Helper()
	p, err := find()
	if err == nil {
		return p
	}
	msg := "DuckDB is needed to read the Parquet files back: " + err.Error() + "; " + installHint
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip("SKIPPED, NOT RUN: " + msg)
	return ""
}

// Query runs sql (one or more statements) with duckdb -csv -c in a fresh
// in-memory database and returns the rows of the last result, its header
// first. It fails the test when DuckDB reports an error.
//
// CSV does not mark where one result ends and the next begins, so Query
// tells results apart by their number of columns: statements before the
// last may print results (CREATE SECRET's Success, for one), but not of the
// last one's width. Use Run to see everything printed.
func Query(t testing.TB, sql string) [][]string {
	t.Helper()
	out := Run(t, sql)
	records := lastResult(t, out)
	if len(records) == 0 {
		t.Fatalf("duckdb printed no result for:\n%s", sql)
	}
	return records
}

// Run runs sql with duckdb -csv -c and returns what it printed on standard
// output, every result one after the other, as the command line shows them.
// DuckDB runs in UTC, as on the hosts the documentation was run on, so that
// it shows a TIMESTAMP WITH TIME ZONE the same way wherever the test runs.
func Run(t testing.TB, sql string) string {
	t.Helper()
	cmd := exec.Command(Path(t), "-csv", "-c", sql)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("duckdb -csv -c: %v\nSQL:\n%s\nstderr:\n%s", err, sql, stderr.String())
	}
	return stdout.String()
}

// lastResult returns the last result of the CSV duckdb printed: the
// records after the last change of width.
func lastResult(t testing.TB, out string) [][]string {
	t.Helper()
	r := csv.NewReader(strings.NewReader(out))
	r.FieldsPerRecord = -1
	records, err := r.ReadAll()
	if err != nil {
		t.Fatalf("reading duckdb's CSV: %v\n%s", err, out)
	}
	start := 0
	for i := 1; i < len(records); i++ {
		if len(records[i]) != len(records[i-1]) {
			start = i
		}
	}
	return records[start:]
}

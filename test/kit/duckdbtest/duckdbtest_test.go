package duckdbtest

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestLastResult(t *testing.T) {
	out := "Success\ntrue\nversion,date,rows\nUUID,DATE,true\n"
	got := lastResult(t, out)
	if len(got) != 2 || strings.Join(got[0], ",") != "version,date,rows" || strings.Join(got[1], ",") != "UUID,DATE,true" {
		t.Fatalf("lastResult: %q", got)
	}
}

// TestCommandLine checks the DuckDB program against what the real command
// line prints in -csv mode, for what the documentation uses: this is what
// keeps the stand-in of scripts/duckdb honest.
func TestCommandLine(t *testing.T) {
	for _, tc := range []struct{ name, sql, want string }{
		{
			"values and quoting",
			`SELECT 1 AS a, NULL AS b, true AS c, false AS d, 'x,y' AS e, 'it''s' AS f, 'say "hi"' AS g, 'two words' AS h`,
			"a,b,c,d,e,f,g,h\n1,,true,false,\"x,y\",\"it's\",\"say \"\"hi\"\"\",two words\n",
		},
		{
			"types as DuckDB shows them",
			`SELECT DATE '2026-11-05' AS d, '0F6C3A52-9D1E-4E7A-8B53-2C1D9F0A7E64'::UUID AS u,
			        TIMESTAMPTZ '2026-11-05 12:00:00.123456789+00' AS t, 42::BIGINT AS n, '\x00a'::BLOB AS b`,
			"d,u,t,n,b\n2026-11-05,0f6c3a52-9d1e-4e7a-8b53-2c1d9f0a7e64,2026-11-05 12:00:00.123456+00,42,\\x00a\n",
		},
		{
			"nested values",
			`SELECT [{'tel': '+15555550101', 'mailto': NULL, 'name': 'Caller Example'}] AS parties, [] AS empty`,
			"parties,empty\n\"[{'tel': +15555550101, 'mailto': NULL, 'name': Caller Example}]\",[]\n",
		},
		{
			"statements in order, only results printed",
			`CREATE SECRET (TYPE http); SET VARIABLE v = (SELECT list(x) FROM range(3) t(x));
			 CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (1), (2);
			 SELECT len(getvariable('v')) AS n, sum(a) AS s FROM t; SELECT a FROM t WHERE false`,
			"Success\ntrue\nn,s\n3,3\na\n",
		},
		{
			"a semicolon inside a string does not split the statement",
			`SELECT 'a;b' AS x;`,
			"x\na;b\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Run(t, tc.sql); got != tc.want {
				t.Errorf("duckdb -csv -c printed:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestCommandLineError(t *testing.T) {
	cmd := exec.Command(Path(t), "-csv", "-c", "SELECT 1 AS a; SELECT * FROM no_such_table; SELECT 2 AS b")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("a failing statement: %v, want exit status 1", err)
	}
	if stdout.String() != "a\n1\n" {
		t.Errorf("standard output %q, want the first result only", stdout.String())
	}
	if !strings.Contains(stderr.String(), "no_such_table") {
		t.Errorf("standard error %q does not name the missing table", stderr.String())
	}
}

func TestVersion(t *testing.T) {
	out, err := exec.Command(Path(t), "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), "v1.5.6 ") {
		t.Errorf("duckdb --version printed %q, want v1.5.6 <words>", out)
	}
}

func TestPathFromEnvironment(t *testing.T) {
	t.Setenv(EnvPath, os.DevNull)
	if _, err := find(); err == nil {
		t.Fatalf("%s=%s, not an executable, was taken", EnvPath, os.DevNull)
	}
}

package testenv

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// CPUProfileEnv names the variable that turns server CPU profiles on: a
// directory where StartProfiled's servers write one profile each. Unset,
// StartProfiled is StartBinary and nothing else changes.
const CPUProfileEnv = "VCON_CPUPROFILE_DIR"

// CPUProfileDir is the directory of CPUProfileEnv, "" when profiles are off.
func CPUProfileDir() string { return os.Getenv(CPUProfileEnv) }

var (
	profiled           = built{pkg: "./test/kit/testenv/cpuprofiled"}
	profiledNoLogTrees = built{pkg: "./test/kit/testenv/cpuprofiled", tags: "nologtree"}
)

// ProfiledBinary builds test/kit/testenv/cpuprofiled once per test
// process (vcon-server's cli.Main inside a CPU profile, built as Binary
// builds the real one) and returns its path.
func ProfiledBinary(t testing.TB) string {
	t.Helper()
	return profiled.get(t)
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// StartProfiled is StartBinary, except that with CPUProfileEnv set the
// server writes its CPU profile to <dir>/<name>.pprof when it stops
// (Proc.Stop); Proc.Profile is that path. Stop it before reading it.
func (e *Env) StartProfiled(name string, env ...string) *Proc {
	e.T.Helper()
	return e.startProfiled(name, &binary, &profiled, env...)
}

// StartWithoutLogTrees is StartProfiled with a command whose audit
// records are rows only, as before the logs were trees (build tag
// nologtree): the same run's baseline for what the trees cost
// (docs/audit-log.md).
func (e *Env) StartWithoutLogTrees(name string, env ...string) *Proc {
	e.T.Helper()
	return e.startProfiled(name, &noLogTrees, &profiledNoLogTrees, env...)
}

func (e *Env) startProfiled(name string, plain, prof *built, env ...string) *Proc {
	e.T.Helper()
	dir := CPUProfileDir()
	if dir == "" {
		return e.startBinaryAt(plain.get(e.T), env...)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.T.Fatal(err)
	}
	path, err := filepath.Abs(filepath.Join(dir, unsafeName.ReplaceAllString(name, "_")+".pprof"))
	if err != nil {
		e.T.Fatal(err)
	}
	p := e.startBinaryAt(prof.get(e.T), append(env, "VCON_CPUPROFILE_OUT="+path)...)
	p.Profile = path
	return p
}

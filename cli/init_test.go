package cli_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// tree lists every path under dir, for comparing what a command left.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		out = append(out, p)
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}

// newHost is a second host's configuration beside e's (the same tables,
// extra at the end), with no data directory and no master key yet: init
// has not run there.
func newHost(t *testing.T, extra string, opts testenv.Options) *testenv.Env {
	h := testenv.Prepare(t, opts)
	for _, p := range []string{h.Config.DataDir, h.Config.MasterKey} {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
	h.WriteConfig(extra)
	return h
}

// refusedInit runs init on h, which must refuse with a message holding
// want, and leave h's folder as it was.
func refusedInit(t *testing.T, h *testenv.Env, want string) {
	t.Helper()
	before := tree(t, h.Dir)
	_, errOut, code := h.TryCLI("init")
	if code == 0 || !strings.Contains(errOut, want) {
		t.Fatalf("init: exit %d %q, want a refusal saying %q", code, errOut, want)
	}
	if after := tree(t, h.Dir); !slices.Equal(after, before) {
		t.Errorf("a refused init changed %s:\nbefore %v\nafter  %v", h.Dir, before, after)
	}
}

// store stores one vCon on e, so that its replica has a change to hold.
func store(t *testing.T, e *testenv.Env) {
	t.Helper()
	u := ids.NewRandom().String()
	if r := e.Do("POST", "/vcons", e.NewKey(e.Tenant("acme"), "write").Token, apitest.NewVcon(u, "replicated", "+15555550100"), "Content-Type", "application/vcon"); r.Status != 201 {
		t.Fatalf("store: %d %s", r.Status, r.Body)
	}
}

// TestInitRefusedForReplica: init on a new host whose [replica] already
// holds a catalog's replica refuses (restore brings that catalog back)
// and makes nothing: no data directory, no spool, no master key.
func TestInitRefusedForReplica(t *testing.T) {
	t.Run("directory", func(t *testing.T) {
		to := filepath.Join(t.TempDir(), "replica")
		rep := "\n[replica]\nto = \"" + to + "\"\nmax_lag = 1\n"
		e := testenv.Prepare(t, testenv.Options{})
		e.WriteConfig(rep)
		e.Start()
		store(t, e)
		e.Stop()
		refusedInit(t, newHost(t, rep, testenv.Options{}), "holds a replica of a catalog")
	})
	t.Run("bucket", func(t *testing.T) {
		srv := s3test.Start(t, "versitygw")
		opts := testenv.Options{Storage: srv.StorageTOML(t, srv.NewBucket(t, false), "vcons/")}
		rep := "\n[replica]\nto = \"s3\"\nmax_lag = 1\n"
		e := testenv.Prepare(t, opts)
		e.WriteConfig(rep)
		e.Start()
		store(t, e)
		e.Stop()
		h := newHost(t, rep, opts)
		refusedInit(t, h, "holds a replica of a catalog")
		if _, err := os.Stat(filepath.Join(h.Config.DataDir, "spool")); !os.IsNotExist(err) {
			t.Errorf("the spool: %v, want none", err)
		}
	})
}

// TestInitRefusedForKey: init with a master key file missing beside a
// catalog makes a key, finds that it does not open the catalog, and
// refuses; the key it made is removed again, so that the next init does
// not take it for the catalog's.
func TestInitRefusedForKey(t *testing.T) {
	e := testenv.Prepare(t, testenv.Options{})
	if err := os.Remove(e.Config.MasterKey); err != nil {
		t.Fatal(err)
	}
	refusedInit(t, e, "does not open the catalog already in")
}

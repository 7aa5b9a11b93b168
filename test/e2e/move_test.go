package e2e

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/s3test"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestMoveObjects stores vCons in the data directory, purges one (leaving
// a tombstone), then moves everything to a bucket, cut off by a kill after
// a copy and after a commit, resumed, and checks every vCon reads back and
// check is clean.
func TestMoveObjects(t *testing.T) {
	srv := s3test.Start(t, "versitygw")
	e := testenv.New(t, testenv.Options{Retention: "0d"})
	k := e.NewKey(e.Tenant("acme"), "write", "read", "delete")
	stored := map[string][]byte{}
	for i := 0; i < 12; i++ {
		u := ids.NewRandom().String()
		body := apitest.NewVcon(u, "move", "+15555550100")
		if r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("POST: %d", r.Status)
		}
		stored[u] = body
	}
	for u := range stored {
		if r := e.Do("DELETE", "/vcons/"+u, k.Token, nil); r.Status != 204 {
			t.Fatalf("DELETE: %d", r.Status)
		}
		delete(stored, u)
		break
	}
	e.Stop()
	e.WriteConfig(srv.StorageTOML(t, srv.NewBucket(t, false), "site/"))

	bin := testenv.Binary(t)
	for _, point := range []string{crashpoint.MoveAfterCopy, crashpoint.MoveAfterCommit} {
		cmd := exec.Command(bin, "storage", "move-objects", "--config", e.ConfigPath)
		cmd.Env = append(os.Environ(), crashpoint.EnvVar+"="+point)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("move-objects at %s: %v\n%s", point, err, out)
		}
	}
	if _, errOut, code := e.TryCLI("check"); code != 1 || !strings.Contains(errOut, "problem") {
		t.Fatalf("check with objects half moved: %d %s", code, errOut)
	}
	out := e.CLI("storage", "move-objects")
	if !strings.Contains(out, `"moved":10`) || !strings.Contains(out, `"tombstones":1`) {
		t.Fatalf("resumed move: %s", out)
	}
	if out := e.CLI("check", "--deep"); !strings.Contains(out, `"versions":11,"objects":11,"packed":0,"damaged":[],"problems":[]`) {
		t.Fatalf("check after the move: %s", out)
	}
	if e.Count("objects") != 11 || e.Count("purged") != 1 {
		t.Fatalf("bucket holds %d objects, %d tombstones", e.Count("objects"), e.Count("purged"))
	}
	// The purge count went with the tombstone: a catalog restored later
	// still finds that it is behind the bucket.
	rc, err := e.Store().Get(context.Background(), archive.PurgeCountKey)
	if err != nil {
		t.Fatalf("the bucket has no purge count after the move: %v", err)
	}
	count, _ := io.ReadAll(rc)
	rc.Close()
	if string(count) != "1\n" {
		t.Fatalf("the bucket's purge count is %q after the move, want 1", count)
	}
	if _, err := os.Stat(filepath.Join(e.Config.DataDir, archive.PurgeCountKey)); !os.IsNotExist(err) {
		t.Fatalf("the data directory keeps its purge count after the move: %v", err)
	}
	e.Start()
	for u, body := range stored {
		if got := e.Do("GET", "/vcons/"+u, k.Token, nil); !bytes.Equal(got.Body, body) {
			t.Fatalf("%s reads %d after the move", u, got.Status)
		}
	}
	if _, errOut, code := e.TryCLI("storage", "move-objects"); code != 1 || !strings.Contains(errOut, "runs only while the server is stopped") {
		t.Fatalf("move-objects beside a server: %d %s", code, errOut)
	}
}

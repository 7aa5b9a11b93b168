package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// eraseSteps are the points an erasure passes, in order: its key
// transaction, each purge's steps, and the purges all done before the
// erasure is recorded done (docs/erasure.md, "Crash safety").
var eraseSteps = []string{
	crashpoint.EraseAfterBatch,
	crashpoint.EraseAfterKeys,
	crashpoint.PurgeAfterKey,
	crashpoint.PurgeAfterCount,
	crashpoint.PurgeAfterTombstone,
	crashpoint.PurgeAfterDelete,
	crashpoint.EraseAfterPurges,
}

// TestCrashErasure kills the binary at every step of an erasure: the next
// start finishes it, with its receipt, and reads back every vCon it did
// not take. In a bucket, and in the data directory.
func TestCrashErasure(t *testing.T) {
	c := &crashEnv{t: t}
	for _, p := range eraseSteps {
		t.Run(p, func(t *testing.T) { crashErase(t, c, p) })
	}
}

// crashErase is the crash walk's scenario of the erasure's own points
// (crash_test.go), and TestCrashErasure's of every point it passes.
func crashErase(t *testing.T, c *crashEnv, point string) {
	const party = "+15555550177"
	e := binaryEnv(t, c, point == crashpoint.EraseAfterPurges, "", testenv.Options{})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read", "delete")
	e.CLI("tenant", "set-search", tenant, "parties")
	a := acked{}
	p := e.StartBinary()
	storeSome(t, e, k.Token, 2, a) // the test's party is not theirs
	var taken []string
	for i := 0; i < 2; i++ {
		u := ids.NewRandom().String()
		if r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(u, "erase me", party), "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("POST: %d %s", r.Status, r.Body)
		}
		taken = append(taken, u)
	}
	waitComplete(t, e, k.Token)
	body := []byte(`{"tel":"` + party + `"}`)
	if point == crashpoint.EraseAfterBatch {
		// Cut between two batches: an erasure by uuids of more held
		// uuids than one batch takes, which sort first, and of the two,
		// which only the next start's batch takes.
		body = eraseInBatches(t, e, tenant, taken)
	}
	p.Stop()

	p = e.StartBinary(crashpoint.EnvVar + "=" + point)
	sendUntilDeath(t, e, p, point, "POST", "/erasures", k.Token, body)
	for _, u := range taken {
		a[u] = nil
	}
	recoverAndCheck(t, e, k.Token, a)
	if n := e.Count("objects"); n != 2 {
		t.Fatalf("%d objects after the erasure was finished, want 2", n)
	}

	// The erasure the kill cut is recorded done, with a receipt that
	// verifies, and it answers as any other.
	cat, err := catalog.Open(context.Background(), e.Config.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	var id []byte
	var receipt string
	err = cat.DB().QueryRow(`SELECT id, receipt FROM erasures WHERE done_at IS NOT NULL`).Scan(&id, &receipt)
	cat.Close()
	if err != nil {
		t.Fatalf("the erasure is not recorded done after the start: %v", err)
	}
	file := filepath.Join(e.Dir, "receipt.jws")
	os.WriteFile(file, []byte(receipt), 0o600)
	if out := e.CLI("erasure", "verify", "--receipt", file); !strings.Contains(out, `"vcons":2,"versions":2`) {
		t.Fatalf("erasure verify: %s", out)
	}
	p = e.StartBinary()
	r := e.Do("GET", "/erasures/"+ids.ID(id).String(), k.Token, nil)
	p.Stop()
	var got struct{ State, Receipt string }
	r.JSON(t, &got)
	if r.Status != 200 || got.State != "done" || got.Receipt != receipt {
		t.Fatalf("GET /erasures/{id}: %d %s", r.Status, r.Body)
	}
}

// eraseInBatches holds more than one batch of uuids that sort before
// random ones, and returns the body of an erasure of them and of taken.
func eraseInBatches(t *testing.T, e *testenv.Env, tenant string, taken []string) []byte {
	t.Helper()
	op := e.OperatorKey()
	all := slices.Clone(taken)
	for i := range catalog.EraseBatch + 5 {
		u := fmt.Sprintf("00000000-0000-4000-8000-%012x", i)
		if r := e.Do("PUT", "/admin/tenants/"+tenant+"/holds/"+u, op.Token, nil); r.Status != 200 {
			t.Fatalf("hold: %d %s", r.Status, r.Body)
		}
		all = append(all, u)
	}
	return []byte(`{"uuids":["` + strings.Join(all, `","`) + `"]}`)
}

// waitComplete waits until the tenant's search index is built.
func waitComplete(t *testing.T, e *testenv.Env, token string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var got struct{ Complete bool }
		json.Unmarshal(e.Do("GET", "/vcons?tel=1", token, nil).Body, &got)
		if got.Complete {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the search index was never built")
}

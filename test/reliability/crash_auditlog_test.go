package reliability

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/crashpoint"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// crashAuditLog: the server dies with a batch's leaves written and not
// committed (log-after-nodes), or with checkpoints signed and not recorded
// (log-after-sign). The next start has every acknowledged vCon, each log
// verifies against its rows and against a checkpoint taken before the
// kill, and a new checkpoint covers the records the cut one would have.
func crashAuditLog(t *testing.T, c *crashEnv, point string) {
	e := binaryEnv(t, c, false, "", testenv.Options{})
	k := e.NewKey(e.Tenant("acme"), "write", "read", "audit")
	a := acked{}
	p := e.StartBinary()
	storeSome(t, e, k.Token, 3, a)
	saved := filepath.Join(t.TempDir(), "checkpoint")
	os.WriteFile(saved, e.WaitCheckpoint(k.Token, 4), 0o600) // the key's record and three stores
	p.Stop()

	p = e.StartBinary(crashpoint.EnvVar + "=" + point)
	u := ids.NewRandom().String()
	body := apitest.NewVcon(u, "cut", "+15555550100")
	if point == crashpoint.LogAfterNodes {
		sendUntilDeath(t, e, p, point, "POST", "/vcons", k.Token, body)
	} else {
		// The store commits and answers; the pass that would sign it dies.
		if r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("POST: %d %s", r.Status, r.Body)
		}
		a[u] = body
		for deadline := time.Now().Add(30 * time.Second); !p.Exited(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the server never reached %s", point)
			}
		}
	}
	recoverAndCheck(t, e, k.Token, a)
	for _, log := range [][]string{{"--tenant", "acme", "--checkpoint", saved}, {"--admin"}} {
		if out, errOut, code := e.TryCLI(append([]string{"audit", "verify"}, log...)...); code != 0 {
			t.Fatalf("audit verify %v after %s: exit %d %s%s", log, point, code, out, errOut)
		}
	}
	p = e.StartBinary()
	defer p.Stop()
	if point == crashpoint.LogAfterSign {
		// The key's record and four stores at least (recoverAndCheck reads).
		var cp []byte
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			cp = e.Do("GET", "/audit/log/checkpoint", k.Token, nil).Body
			if lines := strings.Split(string(cp), "\n"); len(lines) > 1 && atoi(lines[1]) >= 5 {
				return
			}
		}
		t.Fatalf("after the restart no checkpoint covers the store the pass was cut before:\n%s", cp)
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

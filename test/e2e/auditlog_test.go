package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestAuditLogCLIBesideServer: the CLI appends to the logs a serving
// server appends to, in turns. The server keeps each log's head between
// its batches without reading it again, so each of its batches after the
// CLI's appends collides with them and runs again (docs/FORMAT.md, "Audit
// log tree"): every request is answered, and both logs are their rows'
// trees, as audit verify recomputes them.
func TestAuditLogCLIBesideServer(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	ops := e.OperatorKey()
	for i := range 4 {
		storeMany(t, e, k.Token, 3) // the tenant's log, by the server
		r := e.Do("POST", "/admin/tenants", ops.Token, []byte(fmt.Sprintf(`{"name":"t%d"}`, i)), "Content-Type", "application/json")
		if r.Status != 201 { // the admin log, by the server
			t.Fatalf("POST /admin/tenants after the CLI's appends: %d %s", r.Status, r.Body)
		}
		e.NewKey(tenant, "read") // both logs, by the CLI
	}
	storeMany(t, e, k.Token, 3)
	e.Stop()
	for _, log := range [][]string{{"--tenant", "acme"}, {"--admin"}} {
		out, errOut, code := e.TryCLI(append([]string{"audit", "verify"}, log...)...)
		if code != 0 {
			t.Fatalf("audit verify %s of logs the CLI appended to beside the server: exit %d %s%s", strings.Join(log, " "), code, out, errOut)
		}
	}
}

package server_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
	_ "modernc.org/sqlite"
)

// TestAuditVerifyFindsTampering: a tenant saves its log's checkpoint; with
// the server stopped, one record's column is changed with SQL, then the
// newest record deleted: audit verify exits 1 naming the record each
// time, and 0 on the log as it was.
func TestAuditVerifyFindsTampering(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "audit")
	for range 5 {
		r := e.Do("POST", "/vcons", k.Token, apitest.NewVcon(ids.NewRandom().String(), "x", "+15555550100"), "Content-Type", "application/vcon")
		if r.Status != 201 || r.Header.Get("Vcon-Audit-Index") == "" {
			t.Fatalf("POST /vcons: %d, Vcon-Audit-Index %q", r.Status, r.Header.Get("Vcon-Audit-Index"))
		}
	}
	cp := e.WaitCheckpoint(k.Token, 6) // the key's record and five stores
	saved := filepath.Join(t.TempDir(), "checkpoint")
	os.WriteFile(saved, cp, 0o600)
	e.Stop()

	verify := func(want int, says string) {
		t.Helper()
		out, errOut, code := e.TryCLI("audit", "verify", "--tenant", "acme", "--checkpoint", saved)
		if code != want || !strings.Contains(out+errOut, says) {
			t.Errorf("audit verify: exit %d %s%s, want %d and %q", code, out, errOut, want, says)
		}
	}
	verify(0, "6 records")
	db, err := sql.Open("sqlite", "file:"+filepath.Join(e.Config.DataDir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	run := func(q string) {
		t.Helper()
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	run(`UPDATE audit SET status = 200 WHERE id = (SELECT id FROM audit ORDER BY id LIMIT 1 OFFSET 3)`)
	verify(1, "record 3 (row id")
	run(`UPDATE audit SET status = 201 WHERE id = (SELECT id FROM audit ORDER BY id LIMIT 1 OFFSET 3)`)
	verify(0, "6 records")
	run(`DELETE FROM audit WHERE id = (SELECT max(id) FROM audit)`)
	verify(1, "record 5 is missing")
}

package server_test

import (
	"crypto/ed25519"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/translog"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// auditIndex is an answer's Vcon-Audit-Index, -1 without one.
func auditIndex(t *testing.T, r testenv.Response) int {
	t.Helper()
	h := r.Header.Get("Vcon-Audit-Index")
	if h == "" {
		return -1
	}
	n, err := strconv.Atoi(h)
	if err != nil {
		t.Fatalf("Vcon-Audit-Index %q", h)
	}
	return n
}

// logEntries waits for the checkpoint at prefix (/audit/log or
// /admin/log) to cover more than index records, and returns the records
// of the first tile of entries it covers.
func logEntries(t *testing.T, e *testenv.Env, prefix, token string, index int) []string {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		cp := strings.Split(string(e.Do("GET", prefix+"/checkpoint", token, nil).Body), "\n")
		size, _ := strconv.Atoi(cp[1])
		if size <= index || size > 256 {
			continue
		}
		r := e.Do("GET", fmt.Sprintf("%s/tile/entries/000.p/%d", prefix, size), token, nil)
		var out []string
		for b := r.Body; len(b) >= 2; {
			n := int(binary.BigEndian.Uint16(b))
			out, b = append(out, string(b[2:2+n])), b[2+n:]
		}
		return out
	}
	t.Fatalf("%s: no checkpoint past record %d in 5 s", prefix, index)
	return nil
}

// TestChangesNameTheirRecord: the answer of a delete, an erasure and an
// admin change names its record's index in its log, the tenant's or the
// admin log; a refusal that changed nothing names none. The erasure's
// answer carries its erase record, and once a checkpoint covers it, an
// inclusion proof that verifies under the log's key. check then verifies
// every log, and reports a record changed behind the server's back.
func TestChangesNameTheirRecord(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "delete", "audit")
	op := e.OperatorKey()
	u, gone := ids.NewRandom().String(), ids.NewRandom().String()
	stored := auditIndex(t, e.Do("POST", "/vcons", k.Token, apitest.NewVcon(u, "x", partyTel), "Content-Type", "application/vcon"))
	e.Do("POST", "/vcons", k.Token, apitest.NewVcon(gone, "y", partyTel), "Content-Type", "application/vcon")
	r := e.Do("DELETE", "/vcons/"+u, k.Token, nil)
	del := auditIndex(t, r)
	if r.Status != 204 || stored < 0 || del != stored+2 {
		t.Fatalf("DELETE: %d, Vcon-Audit-Index %d after the store's %d", r.Status, del, stored)
	}
	if r := e.Do("DELETE", "/vcons/"+ids.NewRandom().String(), k.Token, nil); r.Status != 404 || auditIndex(t, r) != -1 {
		t.Errorf("a refused DELETE: %d, Vcon-Audit-Index %q", r.Status, r.Header.Get("Vcon-Audit-Index"))
	}

	r = e.Do("PUT", "/admin/tenants/"+tenant+"/retention", op.Token, []byte(`{"retention":"30d"}`), "Content-Type", "application/json")
	ret := auditIndex(t, r)
	r = e.Do("PUT", "/admin/tenants/"+tenant+"/holds/"+ids.NewRandom().String(), op.Token, nil)
	hold := auditIndex(t, r)
	if r.Status != 200 || ret < 0 || hold != ret+1 {
		t.Fatalf("admin changes: retention's index %d, the hold's %d (%d)", ret, hold, r.Status)
	}
	if r := e.Do("GET", "/admin/tenants/"+tenant, op.Token, nil); auditIndex(t, r) != -1 {
		t.Error("a GET of an admin route names a record")
	}
	admin := logEntries(t, e, "/admin/log", op.Token, hold)
	if !strings.Contains(admin[ret], `"index":`+strconv.Itoa(ret)+`,`) || !strings.Contains(admin[ret], "retention") || !strings.Contains(admin[hold], "hold") {
		t.Errorf("the admin log's records at the answers' indexes: %s / %s", admin[ret], admin[hold])
	}
	tenantLog := logEntries(t, e, "/audit/log", k.Token, del)
	if !strings.Contains(tenantLog[del], `"action":"delete"`) || !strings.Contains(tenantLog[del], u) {
		t.Errorf("the tenant's record at the delete's index: %s", tenantLog[del])
	}

	// An erasure: its answer's header names the request's record; the
	// body its erase record, just before it.
	r = e.Do("POST", "/erasures", k.Token, []byte(`{"uuids":["`+gone+`"]}`), "Content-Type", "application/json")
	var ans struct {
		Erasure     string  `json:"erasure"`
		AuditIndex  *int    `json:"audit_index"`
		AuditRecord string  `json:"audit_record"`
		AuditProof  *string `json:"audit_proof"`
	}
	r.JSON(t, &ans)
	req := auditIndex(t, r)
	if r.Status != 200 || ans.AuditIndex == nil || req != *ans.AuditIndex+1 ||
		!strings.Contains(ans.AuditRecord, `"action":"erase"`) || !strings.Contains(ans.AuditRecord, "erasure="+ans.Erasure+" ") {
		t.Fatalf("POST /erasures: %d, Vcon-Audit-Index %d, %s", r.Status, req, r.Body)
	}
	var got testenv.Response
	for deadline := time.Now().Add(5 * time.Second); ans.AuditProof == nil && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		got = e.Do("GET", "/erasures/"+ans.Erasure, k.Token, nil)
		got.JSON(t, &ans)
	}
	if ans.AuditProof == nil {
		t.Fatalf("GET /erasures/{id}: no audit_proof in 5 s: %s", got.Body)
	}
	checkProof(t, e, k.Token, *ans.AuditProof, *ans.AuditIndex, ans.AuditRecord)
	saved := filepath.Join(t.TempDir(), "answer.json")
	os.WriteFile(saved, got.Body, 0o600)
	if out := e.CLI("erasure", "verify", "--receipt", saved); !strings.Contains(out, `"valid":true`) {
		t.Errorf("erasure verify of the answer with its proof: %s", out)
	}
	other := strings.Replace(string(got.Body), `\"index\":`+strconv.Itoa(*ans.AuditIndex), `\"index\":`+strconv.Itoa(*ans.AuditIndex+1), 1)
	os.WriteFile(saved, []byte(other), 0o600)
	if _, errOut, code := e.TryCLI("erasure", "verify", "--receipt", saved); code != 1 || !strings.Contains(errOut, "audit_record") {
		t.Errorf("erasure verify of an answer whose record was changed: exit %d %s", code, errOut)
	}

	e.Stop()
	out, errOut, code := e.TryCLI("check")
	if code != 0 || !strings.Contains(out, `{"admin_log":{"problems":[],"records":`) {
		t.Fatalf("check: exit %d\n%s%s", code, out, errOut)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(e.Config.DataDir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE audit SET status = 500 WHERE id = (SELECT max(id) FROM audit WHERE action = 'delete' AND status = 204)`); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = e.TryCLI("check")
	if code != 1 || !strings.Contains(out, fmt.Sprintf("audit log: the audit log was changed: record %d", del)) {
		t.Fatalf("check of a changed record: exit %d\n%s%s", code, out, errOut)
	}
}

// checkProof verifies a tlog-proof of record at index with the log's
// verifier key, as an outsider would: the checkpoint's signature, then
// the audit path to its root.
func checkProof(t *testing.T, e *testenv.Env, token, proof string, index int, record string) {
	t.Helper()
	vkey := strings.TrimSpace(string(e.Do("GET", "/audit/log/key", token, nil).Body))
	parts := strings.SplitN(vkey, "+", 3)
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if len(parts) != 3 || err != nil || len(raw) != 33 || raw[0] != 1 {
		t.Fatalf("verifier key %q", vkey)
	}
	head, note, ok := strings.Cut(proof, "\n\n")
	lines := strings.Split(head, "\n")
	if !ok || lines[0] != "c2sp.org/tlog-proof@v1" || lines[1] != "index "+strconv.Itoa(index) {
		t.Fatalf("proof %q", proof)
	}
	var path []translog.Hash
	for _, l := range lines[2:] {
		b, err := base64.StdEncoding.DecodeString(l)
		if err != nil || len(b) != translog.HashSize {
			t.Fatalf("proof line %q", l)
		}
		path = append(path, translog.Hash(b))
	}
	cp, err := translog.Open([]byte(note), parts[0], ed25519.PublicKey(raw[1:]))
	if err != nil {
		t.Fatalf("the proof's checkpoint: %v", err)
	}
	root, err := translog.RootFromInclusion(translog.LeafHash([]byte(record)), uint64(index), cp.Size, path)
	if err != nil || root != cp.Root {
		t.Fatalf("the record is not in the signed tree: %v", err)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(record), &rec); err != nil {
		t.Fatal(err)
	}
}

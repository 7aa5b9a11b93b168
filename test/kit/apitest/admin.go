package apitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

func adminAPI(t *testing.T, e *testenv.Env) {
	ops := e.OperatorKey()
	r := e.Do("POST", "/admin/tenants", ops.Token, []byte(`{"name":"initech"}`), "Content-Type", "application/json")
	expect(t, r, 201, "create tenant")
	var tenant struct {
		ID, Name, Metadata string
		Retention          *string
	}
	r.JSON(t, &tenant)
	if tenant.Name != "initech" || tenant.Metadata != "none" || tenant.Retention != nil {
		t.Fatalf("tenant: %+v", tenant)
	}
	expect(t, e.Do("POST", "/admin/tenants", ops.Token, []byte(`{"name":"initech"}`)), 409, "duplicate name")
	expect(t, e.Do("POST", "/admin/tenants", ops.Token, []byte(`{"name":"Bad Name"}`)), 400, "bad name")
	expect(t, e.Do("POST", "/admin/tenants", ops.Token, []byte(`{"nam":"x"}`)), 400, "unknown field")
	expect(t, e.Do("GET", "/admin/tenants/"+tenant.ID, ops.Token, nil), 200, "show")
	expect(t, e.Do("GET", "/admin/tenants/"+ids.NewRandom().String(), ops.Token, nil), 404, "show missing")
	r = e.Do("PUT", "/admin/tenants/"+tenant.ID+"/metadata", ops.Token, []byte(`{"metadata":"counts"}`))
	expect(t, r, 200, "metadata")
	r.JSON(t, &tenant)
	if tenant.Metadata != "counts" {
		t.Fatalf("metadata: %+v", tenant)
	}
	expect(t, e.Do("PUT", "/admin/tenants/"+tenant.ID+"/metadata", ops.Token, []byte(`{"metadata":"most"}`)), 400, "unknown level")
	r = e.Do("PUT", "/admin/tenants/"+tenant.ID+"/retention", ops.Token, []byte(`{"retention":"7d"}`))
	expect(t, r, 200, "retention")
	r.JSON(t, &tenant)
	if tenant.Retention == nil || *tenant.Retention != "7d" {
		t.Fatalf("retention: %+v", tenant)
	}
	expect(t, e.Do("PUT", "/admin/tenants/"+tenant.ID+"/retention", ops.Token, []byte(`{"retention":"7"}`)), 400, "retention without d")
	r = e.Do("PUT", "/admin/tenants/"+tenant.ID+"/retention", ops.Token, []byte(`{"retention":null}`))
	r.JSON(t, &tenant)
	if tenant.Retention != nil {
		t.Fatalf("retention null: %+v", tenant)
	}
	var all []json.RawMessage
	e.Do("GET", "/admin/tenants", ops.Token, nil).JSON(t, &all)
	if len(all) != 1 {
		t.Fatalf("tenants: %s", all)
	}
	m := e.Do("GET", "/metrics", ops.Token, nil)
	expect(t, m, 200, "metrics")
	if !bytes.Contains(m.Body, []byte("vcon_http_requests_total")) || bytes.Contains(m.Body, []byte(tenant.ID)) {
		t.Fatalf("metrics:\n%s", m.Body)
	}
}

func auditRecords(t *testing.T, e *testenv.Env) {
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	other := e.NewKey(e.Tenant("globex"), "read")
	uuid := ids.NewRandom().String()
	missing := ids.NewRandom().String()
	ct := []string{"Content-Type", "application/vcon"}
	e.Do("POST", "/vcons", k.Token, NewVcon(uuid, "audit", "+15555550100"), ct...)
	e.Do("PUT", "/vcons/"+uuid, k.Token, NewVcon(uuid, "audit 2", "+15555550100"), ct...)
	e.Do("POST", "/vcons", k.Token, NewVcon(uuid, "audit 3", "+15555550100"), ct...)
	e.Do("GET", "/vcons/"+uuid, k.Token, nil)
	e.Do("GET", "/vcons/"+missing, k.Token, nil)
	e.Do("DELETE", "/vcons/"+uuid, k.Token, nil)
	e.Do("GET", "/vcons/"+uuid, other.Token, nil)
	e.Do("GET", "/vcons/"+uuid, "vcs_bad", nil)
	e.CLI("tenant", "set-metadata", "acme", "form")

	type rec struct {
		Actor, Label, Action, Target string
		Status                       int
	}
	read := func(args ...string) []rec {
		var out []rec
		for _, line := range strings.Split(strings.TrimSpace(e.CLI(append([]string{"audit", "export"}, args...)...)), "\n") {
			var r rec
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			out = append(out, r)
		}
		return out
	}
	key := "key:" + k.ID
	label := "test-write-read"
	want := []rec{
		{"cli", "", "key", k.ID, 200},
		{key, label, "store", uuid, 201},
		{key, label, "replace", uuid, 200},
		{key, label, "store", uuid, 409},
		{key, label, "read", uuid, 200},
		{key, label, "read", missing, 404},
		{key, label, "delete", uuid, 403},
		{"cli", "", "metadata", "", 200},
	}
	got := read("--tenant", "acme")
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("acme's audit log:\n got %v\nwant %v", got, want)
	}
	gotOther := read("--tenant", "globex")
	if len(gotOther) != 2 || gotOther[1].Action != "read" || gotOther[1].Status != 404 || gotOther[1].Target != uuid {
		t.Fatalf("globex's audit log: %v", gotOther)
	}
	admin := read("--admin")
	actions := []string{}
	for _, r := range admin {
		actions = append(actions, fmt.Sprintf("%s:%d", r.Action, r.Status))
	}
	if strings.Join(actions, " ") != "tenant_create:200 key_create:200 tenant_create:200 key_create:200 authenticate:401 tenant_metadata:200" {
		t.Fatalf("admin log: %v", actions)
	}
	_, errOut, code := e.TryCLI("audit", "export", "--tenant", "acme", "--since", "yesterday")
	if code != 1 || !strings.Contains(errOut, `"yesterday" is not an RFC 3339 time such as 2026-11-05T00:00:00Z`) {
		t.Fatalf("bad --since: %d %s", code, errOut)
	}
}

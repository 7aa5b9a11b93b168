package apitest

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

func refusals(t *testing.T, e *testenv.Env) {
	tenant := e.Tenant("acme")
	other := e.Tenant("globex")
	writer := e.NewKey(tenant, "write")
	reader := e.NewKey(tenant, "read")
	otherKey := e.NewKey(other, "write", "read", "delete")
	uuid := ids.NewRandom().String()
	body := NewVcon(uuid, "refusals", "+15555550100")
	ct := []string{"Content-Type", "application/vcon"}

	expect(t, e.Do("POST", "/vcons", "", body, ct...), 401, "no token")
	expect(t, e.Do("POST", "/vcons", "vcs_0000000000000000_wrong", body, ct...), 401, "wrong token")
	expect(t, e.Do("POST", "/vcons", "not-even-a-token", body, ct...), 401, "malformed token")
	expect(t, e.Do("POST", "/vcons", reader.Token, body, ct...), 403, "read key writing")
	expect(t, e.Do("DELETE", "/vcons/"+uuid, writer.Token, nil), 403, "write key deleting")
	expect(t, e.Do("POST", "/vcons", writer.Token, body, "Content-Type", "text/plain"), 415, "text/plain")
	expect(t, e.Do("POST", "/vcons", writer.Token, body), 415, "no content type")
	expect(t, e.Do("POST", "/vcons", writer.Token, body, "Content-Type", "application/vcon", "Content-Encoding", "br"), 415, "brotli")
	expect(t, e.Do("POST", "/vcons", writer.Token, []byte(`{"uuid": "`), ct...), 400, "malformed JSON")
	expect(t, e.Do("POST", "/vcons", writer.Token, []byte(`[1,2,3]`), ct...), 400, "an array")
	expect(t, e.Do("POST", "/vcons", writer.Token, []byte(`{"vcon":"0.4.0","parties":[]}`), ct...), 400, "no uuid")
	expect(t, e.Do("POST", "/vcons", writer.Token, []byte(`{"uuid":"not-a-uuid"}`), ct...), 400, "bad uuid")
	expect(t, e.Do("POST", "/vcons", writer.Token, []byte(strings.Repeat("[", 100000)), ct...), 400, "deep nesting")
	other2 := ids.NewRandom().String()
	expect(t, e.Do("PUT", "/vcons/"+other2, writer.Token, body, ct...), 400, "uuid mismatch")
	expect(t, e.Do("PUT", "/vcons/../../etc/passwd", writer.Token, body, ct...), 404, "path trick")
	big := append([]byte(`{"uuid":"`+ids.NewRandom().String()+`","x":"`), bytes.Repeat([]byte("a"), 2<<20)...)
	big = append(big, `"}`...)
	expect(t, e.Do("POST", "/vcons", writer.Token, big, ct...), 413, "oversized body")
	expect(t, e.Do("POST", "/vcons", writer.Token, gzipBomb(t, 256<<20), "Content-Type", "application/vcon+gzip"), 413, "gzip bomb")
	expect(t, e.Do("POST", "/vcons", writer.Token, []byte("\x1f\x8bnot gzip at all"), "Content-Type", "application/vcon", "Content-Encoding", "gzip"), 400, "broken gzip")

	// None of the refusals left anything: the uuid is unknown.
	expect(t, e.Do("POST", "/vcons", writer.Token, body, ct...), 201, "the good store after the refusals")
	expect(t, e.Do("GET", "/vcons/"+uuid, otherKey.Token, nil), 404, "another tenant's uuid")
	expect(t, e.Do("GET", "/vcons/"+uuid+"/versions", otherKey.Token, nil), 404, "another tenant's versions")
	expect(t, e.Do("DELETE", "/vcons/"+uuid, otherKey.Token, nil), 404, "another tenant's delete")
	expect(t, e.Do("PUT", "/vcons/"+uuid, otherKey.Token, body, ct...), 201, "another tenant's PUT is its own vCon")
	expect(t, e.Do("GET", "/vcons/"+uuid, reader.Token, nil), 200, "still ours")
	expect(t, e.Do("GET", "/vcons/"+other2, reader.Token, nil), 404, "missing uuid")
	expect(t, e.Do("GET", "/admin/tenants", writer.Token, nil), 403, "tenant key on the admin API")

	objects := e.Count("objects")
	if objects != 2 {
		t.Fatalf("%d object files after the refusals, want 2", objects)
	}
}

func isolation(t *testing.T, e *testenv.Env) {
	a := e.Tenant("acme")
	b := e.Tenant("globex")
	ka := e.NewKey(a, "write", "read", "delete")
	kb := e.NewKey(b, "write", "read", "delete")
	uuid := ids.NewRandom().String()
	body := NewVcon(uuid, "isolation", "+15555550100")
	expect(t, e.Do("POST", "/vcons", ka.Token, body, "Content-Type", "application/vcon"), 201, "POST")
	expect(t, e.Do("GET", "/vcons/"+uuid, kb.Token, nil), 404, "GET")
	expect(t, e.Do("GET", "/vcons/"+uuid+"/versions", kb.Token, nil), 404, "versions")
	expect(t, e.Do("DELETE", "/vcons/"+uuid, kb.Token, nil), 404, "DELETE")
	var page struct{ UUIDs []string }
	e.Do("GET", "/vcons", kb.Token, nil).JSON(t, &page)
	if len(page.UUIDs) != 0 {
		t.Fatalf("globex lists %v", page.UUIDs)
	}
	for _, path := range []string{"/admin/tenants", "/admin/tenants/" + a, "/metrics"} {
		expect(t, e.Do("GET", path, kb.Token, nil), 403, path)
	}
	got := e.Do("GET", "/vcons/"+uuid, ka.Token, nil)
	if !bytes.Equal(got.Body, body) {
		t.Fatal("acme's vCon changed")
	}
}

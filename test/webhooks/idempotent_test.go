package webhooks

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/apitest"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestIdempotentStore: the same bytes again answer 200 with the current
// version and Idempotent-Replayed, store nothing (no version, no object),
// and keep nothing clear: the catalog holds a keyed hash, not the body.
func TestIdempotentStore(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	k := e.NewKey(tenant, "write", "read")
	u := ids.NewRandom().String()
	body := apitest.NewVcon(u, "idempotent subject", "+15550109999")
	ct := []string{"Content-Type", "application/vcon"}
	first := e.Do("POST", "/vcons", k.Token, body, ct...)
	if first.Status != 201 || first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first POST: %d %v", first.Status, first.Header)
	}
	objects := e.Count("objects")
	for _, m := range []string{"POST", "PUT"} {
		path := "/vcons"
		if m == "PUT" {
			path += "/" + u
		}
		r := e.Do(m, path, k.Token, body, ct...)
		if r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(r.Body, first.Body) || r.Header.Get("Location") != "/vcons/"+u {
			t.Fatalf("%s again: %d %v %s, want 200 with %s", m, r.Status, r.Header, r.Body, first.Body)
		}
	}
	if n := e.Count("objects"); n != objects {
		t.Errorf("objects: %d after the retries, %d before", n, objects)
	}
	var vs struct{ Versions []any }
	e.Do("GET", "/vcons/"+u+"/versions", k.Token, nil).JSON(t, &vs)
	if len(vs.Versions) != 1 {
		t.Errorf("versions after retries: %d", len(vs.Versions))
	}
	// The same JSON sent as another type, or gzip, is another store.
	if r := e.Do("POST", "/vcons", k.Token, body, "Content-Type", "application/json"); r.Status != 409 {
		t.Errorf("POST as application/json: %d %s, want 409", r.Status, r.Body)
	}
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(body)
	w.Close()
	if r := e.Do("PUT", "/vcons/"+u, k.Token, gz.Bytes(), "Content-Type", "application/vcon+gzip"); r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("PUT gzip: %d %v, want a new version", r.Status, r.Header)
	}
	// Other bytes: POST 409, PUT a new version without the header.
	other := apitest.NewVcon(u, "other subject", "+15550109999")
	if r := e.Do("POST", "/vcons", k.Token, other, ct...); r.Status != 409 {
		t.Errorf("POST of other bytes: %d", r.Status)
	}
	r := e.Do("PUT", "/vcons/"+u, k.Token, other, ct...)
	if r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("PUT of other bytes: %d %v", r.Status, r.Header)
	}
	// The first bytes again: no longer current, so a new version.
	if r := e.Do("PUT", "/vcons/"+u, k.Token, body, ct...); r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("PUT of an older version's bytes: %d %v", r.Status, r.Header)
	}
	e.Do("GET", "/vcons/"+u+"/versions", k.Token, nil).JSON(t, &vs)
	if len(vs.Versions) != 4 {
		t.Errorf("versions: %d, want 4", len(vs.Versions))
	}
	// Another tenant's same bytes are its own first store.
	k2 := e.NewKey(e.Tenant("globex"), "write")
	if r := e.Do("POST", "/vcons", k2.Token, body, ct...); r.Status != 201 {
		t.Errorf("another tenant's POST: %d", r.Status)
	}
	// Nothing clear in the catalog: the row holds 32 bytes of keyed hash.
	var n int
	if err := e.Daemon.Cat.DB().QueryRow(`SELECT count(*) FROM versions WHERE length(body_mac) = 32`).Scan(&n); err != nil || n != 5 {
		t.Errorf("versions with a 32-byte body_mac: %d (%v), want 5", n, err)
	}
	raw := e.CLI("audit", "export", "--tenant", "acme")
	if strings.Contains(raw, "idempotent subject") {
		t.Errorf("the audit log holds content")
	}
	// One record per request: a store's in its version's transaction, a
	// retry's and a refusal's after the answer.
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(raw), "\n") {
		var rec struct {
			Action string
			Status int
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if rec.Action == "store" || rec.Action == "replace" {
			got = append(got, fmt.Sprintf("%s %d", rec.Action, rec.Status))
		}
	}
	want := []string{"store 201", "store 200", "replace 200", "store 409", "replace 200", "store 409", "replace 200", "replace 200"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("the store records:\n%s\nwant:\n%s", strings.Join(got, ", "), strings.Join(want, ", "))
	}
}

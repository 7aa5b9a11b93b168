package server_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// TestByteOrderMark: a vCon whose body starts with a UTF-8 byte order mark
// is stored and read back byte for byte, mark included; a mark anywhere
// else is a 400 that stores nothing.
func TestByteOrderMark(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	tenant := e.Tenant("acme")
	writer, reader := e.NewKey(tenant, "write"), e.NewKey(tenant, "read")
	ct := []string{"Content-Type", "application/vcon"}

	u := ids.NewRandom().String()
	body := []byte("\xef\xbb\xbf" + `{"vcon":"0.4.0","uuid":"` + u + `","parties":[{"tel":"+15555550100"}],"dialog":[]}`)
	if r := e.Do("POST", "/vcons", writer.Token, body, ct...); r.Status != 201 {
		t.Fatalf("POST a vCon with a byte order mark: %d %s", r.Status, r.Body)
	}
	if r := e.Do("GET", "/vcons/"+u, reader.Token, nil); r.Status != 200 || !bytes.Equal(r.Body, body) {
		t.Errorf("GET: %d %q, want 200 and the bytes sent, %q", r.Status, r.Body, body)
	}
	if r := e.Do("POST", "/vcons", writer.Token, body, ct...); r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the same bytes again: %d %s, want a retry's 200", r.Status, r.Body)
	}

	other := ids.NewRandom().String()
	r := e.Do("POST", "/vcons", writer.Token, []byte(`{"uuid":"`+other+`"}`+"\xef\xbb\xbf"), ct...)
	if r.Status != 400 || !strings.Contains(string(r.Body), "unexpected byte 0xef at byte 47, want the end of input") {
		t.Errorf("a byte order mark after the vCon: %d %s", r.Status, r.Body)
	}
	if r := e.Do("GET", "/vcons/"+other, reader.Token, nil); r.Status != 404 {
		t.Errorf("the refused vCon reads %d", r.Status)
	}
}

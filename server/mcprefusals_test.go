package server_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// rpc posts one raw JSON-RPC body to /mcp; headers alternate name, value.
func rpc(e *testenv.Env, token, session string, body string, headers ...string) testenv.Response {
	e.T.Helper()
	h := append([]string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}, headers...)
	if session != "" {
		h = append(h, "Mcp-Session-Id", session)
	}
	return e.Do("POST", "/mcp", token, []byte(body), h...)
}

const rawInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// rpcRefusal checks that r is a refusal below 500 whose body is a JSON-RPC
// error saying want.
func rpcRefusal(t *testing.T, what string, r testenv.Response, status int, want string) {
	t.Helper()
	var m struct {
		JSONRPC string `json:"jsonrpc"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &m); err != nil || r.Status != status || m.JSONRPC != "2.0" || m.Error.Code == 0 || !strings.Contains(m.Error.Message, want) {
		t.Errorf("%s: %d %s, want %d and a JSON-RPC error saying %q", what, r.Status, r.Body, status, want)
	}
}

// TestMCPRefusals: the HTTP layer refuses a key without mcp (403, in the
// API's error shape, recorded), a foreign Origin, an oversized body or
// batch, an unknown method and another key's session, each as a JSON-RPC
// error below 500 that changes nothing; the endpoint off answers 404.
func TestMCPRefusals(t *testing.T) {
	e := mcpEnv(t, "")
	tenant := e.Tenant("acme")
	reader := e.NewKey(tenant, "read")
	a, b := e.NewKey(tenant, "mcp", "read"), e.NewKey(tenant, "mcp", "read")

	r := rpc(e, reader.Token, "", rawInitialize)
	if r.Status != 403 || !strings.Contains(string(r.Body), `"error":"this key lacks the mcp scope`) {
		t.Errorf("a key without mcp: %d %s", r.Status, r.Body)
	}
	if r := rpc(e, e.NewKey(tenant, "mcp").Token, "", rawInitialize); r.Status != 403 || !strings.Contains(string(r.Body), "lacks the read scope") {
		t.Errorf("a key with mcp alone: %d %s", r.Status, r.Body)
	}
	rpcRefusal(t, "a foreign Origin", rpc(e, a.Token, "", rawInitialize, "Origin", "https://evil.example"), 403, "is not this server's")

	r = rpc(e, a.Token, "", rawInitialize)
	session := r.Header.Get("Mcp-Session-Id")
	if r.Status != 200 || session == "" {
		t.Fatalf("initialize: %d %s", r.Status, r.Body)
	}
	if r := rpc(e, a.Token, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "Mcp-Protocol-Version", "2025-06-18"); r.Status != 202 {
		t.Fatalf("initialized: %d %s", r.Status, r.Body)
	}
	v := func(m string) string { return `{"jsonrpc":"2.0","id":7,"method":"` + m + `","params":{}}` }
	rpcRefusal(t, "another key's session", rpc(e, b.Token, session, v("tools/list"), "Mcp-Protocol-Version", "2025-06-18"), 403, "started by another key")
	rpcRefusal(t, "no such session", rpc(e, a.Token, "not-a-session", v("tools/list")), 404, "no such session")
	rpcRefusal(t, "an unknown method", rpc(e, a.Token, session, v("vcons/delete"), "Mcp-Protocol-Version", "2025-06-18"), 400, "vcons/delete")
	batch := "[" + strings.TrimSuffix(strings.Repeat(v("tools/list")+",", 17), ",") + "]"
	rpcRefusal(t, "a batch of 17", rpc(e, a.Token, session, batch), 400, "at most 16 messages")
	rpcRefusal(t, "a batch under 2025-06-18", rpc(e, a.Token, session, "["+v("tools/list")+"]", "Mcp-Protocol-Version", "2025-06-18"), 400, "batching is not supported")
	huge := `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"search_vcons","arguments":{"tel":"` + strings.Repeat("5", 70<<10) + `"}}}`
	rpcRefusal(t, "huge arguments", rpc(e, a.Token, session, huge, "Mcp-Protocol-Version", "2025-06-18"), 413, "over 65536 bytes")
	long := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"search_vcons","arguments":{"name":"` + strings.Repeat("a", 2000) + `"}}}`
	if r := rpc(e, a.Token, session, long, "Mcp-Protocol-Version", "2025-06-18"); r.Status != 200 || !strings.Contains(string(r.Body), `"isError":true`) || !strings.Contains(string(r.Body), "name must be at most 1024 bytes") {
		t.Errorf("a 2000-byte name: %d %s, want the tool's error", r.Status, r.Body)
	}
	// The session still works for its own key after all that.
	if r := rpc(e, a.Token, session, v("tools/list"), "Mcp-Protocol-Version", "2025-06-18"); r.Status != 200 || !strings.Contains(string(r.Body), "search_vcons") {
		t.Errorf("tools/list after the refusals: %d %s", r.Status, r.Body)
	}
	if got := e.Do("GET", "/vcons", e.NewKey(tenant, "read").Token, nil); !strings.Contains(string(got.Body), `"uuids":[]`) {
		t.Errorf("the refusals changed the archive: %s", got.Body)
	}
	if !strings.Contains(e.CLI("audit", "export", "--tenant", "acme"), `"action":"mcp","status":403`) {
		t.Error("the audit log lacks the refusal of a key without mcp")
	}

	off := testenv.New(t, testenv.Options{})
	k := off.NewKey(off.Tenant("acme"), "mcp", "read")
	if r := rpc(off, k.Token, "", rawInitialize); r.Status != 404 || !strings.Contains(string(r.Body), "[mcp] enabled = true") {
		t.Errorf("the endpoint off: %d %s", r.Status, r.Body)
	}
}

// TestMCPPurposes: under enforce, an assistant's key bound to marketing
// gets the tool's error for a vCon whose lawful basis refuses marketing,
// with a record naming the purpose and why; a key bound to
// customer_service reads it; a search leaves the refused one out.
func TestMCPPurposes(t *testing.T) {
	e := mcpEnv(t, "")
	tenant := e.Tenant("acme")
	writer := e.NewKey(tenant, "write")
	e.CLI("tenant", "set-search", tenant, "parties")
	e.CLI("tenant", "set-lawful-basis", "acme", "enforce")
	u := ids.NewRandom().String()
	body := lawfulVcon(u, goodBasis)
	if r := e.Do("POST", "/vcons", writer.Token, body, "Content-Type", "application/vcon"); r.Status != 201 {
		t.Fatalf("store: %d %s", r.Status, r.Body)
	}
	e.Daemon.IndexSearch(t.Context())
	mk := mcpKey(t, e, tenant, "marketing")
	cs := mcpKey(t, e, tenant, "customer_service")

	s := mcpSession(t, e, mk.Token, "")
	if text, isErr, _ := call(t, s, "get_vcon", map[string]any{"uuid": u}); !isErr || !strings.Contains(text, "refuses the purpose") || !strings.Contains(text, "get_lawful_basis") {
		t.Errorf("marketing get_vcon: %v %s", isErr, text)
	}
	if text, isErr, _ := call(t, s, "search_vcons", map[string]any{"tel": "+15555550100"}); isErr || !strings.Contains(text, `"uuids":[]`) || !strings.Contains(text, `"withheld":1`) {
		t.Errorf("marketing search: %s", text)
	}
	if text, isErr, _ := call(t, s, "get_lawful_basis", map[string]any{"uuid": u}); isErr || !strings.Contains(text, `"refused":["marketing"]`) {
		t.Errorf("marketing get_lawful_basis: %s", text)
	}
	if text, isErr, _ := call(t, mcpSession(t, e, cs.Token, ""), "get_vcon", map[string]any{"uuid": u}); isErr || text != string(body) {
		t.Errorf("customer_service get_vcon: %v %s", isErr, text)
	}
	// A purpose the key lacks, named in the header: the tool's error.
	if text, isErr, _ := call(t, mcpSession(t, e, cs.Token, "analytics"), "get_vcon", map[string]any{"uuid": u}); !isErr || !strings.Contains(text, "not bound to the purpose analytics") {
		t.Errorf("a purpose the key lacks: %v %s", isErr, text)
	}
	audit := e.CLI("audit", "export", "--tenant", "acme")
	for _, want := range []string{
		`"action":"mcp_call tool=get_vcon purpose=marketing denied=purpose_refused","target":"` + u + `","status":451`,
		`"action":"mcp_call tool=search_vcons purpose=marketing withheld=1","target":"filters=tel","status":200`,
		`"action":"mcp_call tool=get_vcon purpose=customer_service","target":"` + u + `","status":200`,
		`"action":"mcp_call tool=get_vcon","status":403`,
	} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit log lacks %s", want)
		}
	}
}

// mcpKey creates an assistant's key: mcp and read, bound to purpose.
func mcpKey(t *testing.T, e *testenv.Env, tenant, purpose string) testenv.Key {
	t.Helper()
	var k testenv.Key
	out := e.CLI("key", "create", "--tenant", tenant, "--label", "assistant", "--scope", "mcp", "--scope", "read", "--purpose", purpose)
	if err := json.Unmarshal([]byte(out), &k); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestMCPForms: a signed vCon comes back as its payload with signed_by
// null, an encrypted one as its uuid and form, one over max_result as
// its uuid, form and size with a note; the rate refuses the call past it.
func TestMCPForms(t *testing.T) {
	e := mcpEnv(t, "max_result = \"4KiB\"\nrate = 8\n")
	tenant := e.Tenant("acme")
	writer := e.NewKey(tenant, "write")
	s := mcpSession(t, e, e.NewKey(tenant, "mcp", "read").Token, "")
	signed, sealed, big, huge := ids.NewRandom().String(), ids.NewRandom().String(), ids.NewRandom().String(), ids.NewRandom().String()
	payload := `{"vcon":"0.4.0","uuid":"` + signed + `","parties":[{"tel":"+15555550100"}]}`
	for _, b := range []string{
		`{"payload":"` + base64.RawURLEncoding.EncodeToString([]byte(payload)) + `","signatures":[{"protected":"e30","signature":"AAAA"}]}`,
		`{"ciphertext":"AAAA","recipients":[],"unprotected":{"uuid":"` + sealed + `"}}`,
		fmt.Sprintf(`{"vcon":"0.4.0","uuid":"%s","parties":[],"dialog":[{"type":"text","body":"%s"}, {"type":"text","body":"%s"}]}`, big, strings.Repeat("x", 5000), strings.Repeat("y", 5000)),
		fmt.Sprintf(`{"vcon":"0.4.0","uuid":"%s","subject":"%s","parties":[],"dialog":[]}`, huge, strings.Repeat("z", 4000)+strings.Repeat("w", 4000)),
	} {
		if r := e.Do("POST", "/vcons", writer.Token, []byte(b), "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("store: %d %s", r.Status, r.Body)
		}
	}
	zipped := ids.NewRandom().String()
	plain := `{"vcon":"0.4.0","uuid":"` + zipped + `","parties":[{"name":"Ada"}]}`
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(plain))
	zw.Close()
	if r := e.Do("POST", "/vcons", writer.Token, gz.Bytes(), "Content-Type", "application/vcon+gzip"); r.Status != 201 {
		t.Fatalf("store gzip: %d %s", r.Status, r.Body)
	}
	if text, isErr, _ := call(t, s, "get_vcon", map[string]any{"uuid": zipped}); isErr || text != plain {
		t.Errorf("a gzip vCon: %s, want its JSON", text)
	}
	text, isErr, res := call(t, s, "get_vcon", map[string]any{"uuid": signed})
	meta, _ := json.Marshal(res.StructuredContent)
	if isErr || text != payload || !bytes.Contains(meta, []byte(`"signed_by":null`)) || !bytes.Contains(meta, []byte(`"form":"signed"`)) {
		t.Errorf("signed: %s %s", text, meta)
	}
	for uuid, want := range map[string]string{sealed: `"form":"encrypted"`, huge: `"note":"larger than this server's [mcp] max_result (4096 bytes) even without its dialog bodies`} {
		text, isErr, _ := call(t, s, "get_vcon", map[string]any{"uuid": uuid})
		if isErr || !strings.Contains(text, want) || !strings.Contains(text, `"included":false`) || strings.Contains(text, "zzzz") {
			t.Errorf("get_vcon %s: %s, want %s", uuid, text, want)
		}
	}
	// Over the bound with its bodies, under it without: read again
	// without them.
	text, isErr, res = call(t, s, "get_vcon", map[string]any{"uuid": big})
	meta, _ = json.Marshal(res.StructuredContent)
	if want := `{"vcon":"0.4.0","uuid":"` + big + `","parties":[],"dialog":[{"type":"text","body":null},{"type":"text","body":null}]}`; isErr || text != want ||
		!bytes.Contains(meta, []byte(`its 2 dialog bodies are left out`)) || !bytes.Contains(meta, []byte(`"included":true`)) {
		t.Errorf("a vCon over max_result: %s %s", text, meta)
	}
	// 8 a minute: initialize and five calls so far.
	for range 2 {
		call(t, s, "vcon_capabilities", nil)
	}
	if _, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "vcon_capabilities"}); err == nil {
		t.Error("no refusal past the rate")
	} else if !strings.Contains(err.Error(), "[mcp] rate") {
		t.Errorf("past the rate: %v", err)
	}
	if !strings.Contains(e.CLI("audit", "export", "--tenant", "acme"), `"status":429`) {
		t.Error("the audit log lacks the refusal past the rate")
	}
}

package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
)

// mcpEnv is a server with [mcp] on, and extra TOML in its table.
func mcpEnv(t *testing.T, extra string) *testenv.Env {
	t.Helper()
	e := testenv.Prepare(t, testenv.Options{})
	e.WriteConfig("[mcp]\nenabled = true\n" + extra)
	e.Start()
	return e
}

// keyed sends the key, and a purpose when one is given, on every request.
type keyed struct {
	token, purpose string
	base           http.RoundTripper
}

func (k keyed) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.token)
	if k.purpose != "" {
		r.Header.Set("Vcon-Purpose", k.purpose)
	}
	return k.base.RoundTrip(r)
}

// mcpSession connects the SDK's own client to e with token.
func mcpSession(t *testing.T, e *testenv.Env, token, purpose string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: keyed{token, purpose, e.Client.Transport}}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: e.BaseURL + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls tool and returns its first text and whether it is an error.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (string, bool, *mcp.CallToolResult) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if len(res.Content) == 0 {
		t.Fatalf("%s: no content", tool)
	}
	return res.Content[0].(*mcp.TextContent).Text, res.IsError, res
}

type mcpPage struct {
	UUIDs  []string `json:"uuids"`
	Cursor *string  `json:"cursor"`
}

// TestMCPTools: over real TLS with the SDK's client, a key with mcp and
// read initializes, lists the five tools with their input schemas,
// searches by party through the blind index and pages through 105
// matches 100 at a time, reads a vCon byte for byte as stored (and as
// the vcon:// resource), lists its versions; another tenant's uuid is not
// found. Each call is a record of the tenant's audit log, naming what it
// returned.
func TestMCPTools(t *testing.T) {
	e := mcpEnv(t, "")
	tenant := e.Tenant("acme")
	writer := e.NewKey(tenant, "write")
	assistant := e.NewKey(tenant, "mcp", "read")
	e.CLI("tenant", "set-search", tenant, "parties")
	other := e.NewKey(e.Tenant("globex"), "write")
	foreign := ids.NewRandom().String()
	if r := e.Do("POST", "/vcons", other.Token, []byte(`{"vcon":"0.4.0","uuid":"`+foreign+`","parties":[{"tel":"+15555550100"}]}`), "Content-Type", "application/vcon"); r.Status != 201 {
		t.Fatalf("store: %d %s", r.Status, r.Body)
	}
	var stored []string
	var first []byte
	for i := range 105 {
		u := ids.NewRandom().String()
		body := []byte(fmt.Sprintf(`{"vcon":"0.4.0","uuid":"%s","subject":"call %d","parties":[{"tel":"+15555550100"},{"name":"Ada"}],"dialog":[]}`, u, i))
		if r := e.Do("POST", "/vcons", writer.Token, body, "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("store: %d %s", r.Status, r.Body)
		}
		stored = append(stored, u)
		if i == 0 {
			first = body
		}
	}
	e.Daemon.IndexSearch(t.Context())

	cs := mcpSession(t, e, assistant.Token, "")
	if cs.InitializeResult().ServerInfo.Name != "vcon-server" {
		t.Errorf("initialize: %+v", cs.InitializeResult().ServerInfo)
	}
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		schema, _ := json.Marshal(tool.InputSchema)
		if !strings.Contains(string(schema), `"type":"object"`) {
			t.Errorf("%s has input schema %s", tool.Name, schema)
		}
		if tool.Name == "search_vcons" && !strings.Contains(string(schema), `"stored_since"`) {
			t.Errorf("search_vcons' schema lacks stored_since: %s", schema)
		}
	}
	slices.Sort(names)
	if want := []string{"get_lawful_basis", "get_vcon", "list_versions", "search_vcons", "vcon_capabilities"}; !slices.Equal(names, want) {
		t.Errorf("tools/list: %v, want %v", names, want)
	}

	// Search by party, the number as a person writes it, in two pages.
	var got []string
	var cursor any
	for page := 0; ; page++ {
		args := map[string]any{"tel": "+1 (555) 555-0100"}
		if cursor != nil {
			args["cursor"] = cursor
		}
		text, isErr, _ := call(t, cs, "search_vcons", args)
		var p mcpPage
		if err := json.Unmarshal([]byte(text), &p); isErr || err != nil {
			t.Fatalf("search page %d: %s", page, text)
		}
		if len(p.UUIDs) > 100 {
			t.Fatalf("a page of %d uuids", len(p.UUIDs))
		}
		got = append(got, p.UUIDs...)
		if p.Cursor == nil {
			break
		}
		cursor = *p.Cursor
		if page > 2 {
			t.Fatal("the pages do not end")
		}
	}
	slices.Sort(got)
	want := slices.Clone(stored)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("search found %d uuids, want the %d stored (not globex's)", len(got), len(want))
	}

	// The stored times bound a page by when the current versions were stored.
	for _, c := range []struct {
		args map[string]any
		n    int
	}{
		{map[string]any{"tel": "+15555550100", "stored_since": "2100-01-01T00:00:00Z"}, 0},
		{map[string]any{"tel": "+15555550100", "stored_until": "2100-01-01T00:00:00Z"}, 100},
		{map[string]any{"name": "ada", "stored_since": "2020-01-01T00:00:00Z", "stored_until": "2100-01-01T00:00:00Z"}, 100},
	} {
		text, isErr, _ := call(t, cs, "search_vcons", c.args)
		var p mcpPage
		if err := json.Unmarshal([]byte(text), &p); isErr || err != nil || len(p.UUIDs) != c.n {
			t.Errorf("search_vcons %v: %d uuids (%s), want %d", c.args, len(p.UUIDs), clipText(text), c.n)
		}
	}
	if text, isErr, _ := call(t, cs, "search_vcons", map[string]any{"stored_since": "yesterday"}); !isErr || !strings.Contains(text, "RFC 3339") {
		t.Errorf("stored_since yesterday: %s", text)
	}

	text, isErr, res := call(t, cs, "get_vcon", map[string]any{"uuid": stored[0]})
	if isErr || text != string(first) {
		t.Errorf("get_vcon: %q, want the bytes stored %q", text, first)
	}
	if meta, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(meta), `"form":"unsigned"`) || !strings.Contains(string(meta), `"signed_by":null`) {
		t.Errorf("get_vcon's structured content: %s", meta)
	}
	rr, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "vcon://" + stored[0]})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != string(first) {
		t.Errorf("vcon:// resource: %v %+v", err, rr)
	}
	if text, isErr, _ := call(t, cs, "list_versions", map[string]any{"uuid": stored[0]}); isErr || !strings.Contains(text, `"current":true`) {
		t.Errorf("list_versions: %s", text)
	}
	if text, isErr, _ := call(t, cs, "get_vcon", map[string]any{"uuid": foreign}); !isErr || text != "no such vCon" {
		t.Errorf("another tenant's uuid: %v %s", isErr, text)
	}
	if _, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "vcon://" + foreign}); err == nil {
		t.Error("another tenant's uuid as a resource was read")
	}
	if text, isErr, _ := call(t, cs, "vcon_capabilities", nil); isErr || !strings.Contains(text, `"writes":false`) {
		t.Errorf("vcon_capabilities: %s", text)
	}

	audit := e.CLI("audit", "export", "--tenant", "acme")
	for _, want := range []string{
		`"action":"mcp_call tool=get_vcon","target":"` + stored[0] + `","status":200`,
		`"action":"mcp_call tool=get_vcon","target":"` + foreign + `","status":404`,
		`"action":"mcp_call resource=vcon","target":"` + stored[0] + `","status":200`,
		`"action":"mcp_call tool=search_vcons","target":"filters=tel uuids=`,
		`"action":"mcp_call tool=vcon_capabilities","status":200`,
	} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit log lacks %s", want)
		}
	}
	if strings.Contains(e.CLI("audit", "export", "--tenant", "globex"), "mcp_call") {
		t.Error("globex's log records acme's calls")
	}
}

func clipText(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// TestMCPStreamsEndAtStop: a session's open event stream (the GET every
// client holds) does not hold a stopping server: its streams end at once.
func TestMCPStreamsEndAtStop(t *testing.T) {
	e := mcpEnv(t, "")
	cs := mcpSession(t, e, e.NewKey(e.Tenant("acme"), "mcp", "read").Token, "")
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e.Stop()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the stop took %v with a session's stream open", d)
	}
}

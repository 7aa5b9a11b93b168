package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/test/kit/testenv"
	"github.com/vcon-server/vcon-server/test/kit/toolbin"
)

// tsClient is the TypeScript client scripts/install-mcp-client.sh
// installs. Without it the test is skipped, loudly; on CI (CI=true) it
// fails instead.
func tsClient(t *testing.T) string {
	t.Helper()
	if p := toolbin.Find("vcon-mcp-client", ""); p != "" {
		return p
	}
	msg := "the TypeScript MCP client is needed: install it with scripts/install-mcp-client.sh (node and npm, outside the repository)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip("SKIPPED, NOT RUN: " + msg)
	return ""
}

// runTS runs the TypeScript client against e with token, purpose and
// plan, and returns its JSON lines.
func runTS(t *testing.T, client string, e *testenv.Env, token, purpose string, plan []map[string]any) []map[string]any {
	t.Helper()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(e.BaseURL, "https://"))
	p, _ := json.Marshal(plan)
	cmd := exec.Command(client, "https://localhost:"+port+"/mcp", token, purpose, string(p))
	cmd.Env = append(os.Environ(), "NODE_EXTRA_CA_CERTS="+e.Config.TLS.Cert)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil && !strings.Contains(string(out), "connect_error") {
		t.Fatalf("vcon-mcp-client: %v\n%s%s", err, out, stderr.String())
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("vcon-mcp-client printed %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// TestMCPTypeScriptClient: the official TypeScript client, over real TLS,
// initializes, lists the tools with their arguments, pages a search by
// party through 105 vCons, reads a vCon equal to the bytes stored (and
// as vcon://), and does not find another tenant's uuid; a key without
// mcp is refused; under enforce, a key bound to a purpose the vCon's
// lawful basis refuses gets the tool's error, recorded.
func TestMCPTypeScriptClient(t *testing.T) {
	client := tsClient(t)
	e := mcpEnv(t, "")
	tenant := e.Tenant("acme")
	writer := e.NewKey(tenant, "write")
	e.CLI("tenant", "set-search", tenant, "parties")
	foreign := ids.NewRandom().String()
	if r := e.Do("POST", "/vcons", e.NewKey(e.Tenant("globex"), "write").Token, []byte(`{"vcon":"0.4.0","uuid":"`+foreign+`","parties":[{"tel":"+15555550100"}]}`), "Content-Type", "application/vcon"); r.Status != 201 {
		t.Fatalf("store: %d %s", r.Status, r.Body)
	}
	var stored []string
	var first []byte
	for i := range 105 {
		u := ids.NewRandom().String()
		body := []byte(fmt.Sprintf(`{"vcon":"0.4.0","uuid":"%s","parties":[{"tel":"+15555550100"}],"dialog":[{"type":"text","body":"call %d"}]}`, u, i))
		if r := e.Do("POST", "/vcons", writer.Token, body, "Content-Type", "application/vcon"); r.Status != 201 {
			t.Fatalf("store: %d %s", r.Status, r.Body)
		}
		stored = append(stored, u)
		if i == 0 {
			first = body
		}
	}
	lawful := ids.NewRandom().String()
	if r := e.Do("POST", "/vcons", writer.Token, lawfulVcon(lawful, goodBasis), "Content-Type", "application/vcon"); r.Status != 201 {
		t.Fatalf("store: %d %s", r.Status, r.Body)
	}
	e.Daemon.IndexSearch(t.Context())

	out := runTS(t, client, e, e.NewKey(tenant, "mcp", "read").Token, "", []map[string]any{
		{"pages": map[string]any{"tel": "+1 555 555 0100"}},
		{"tool": "get_vcon", "args": map[string]any{"uuid": stored[0]}},
		{"resource": "vcon://" + stored[0]},
		{"tool": "get_vcon", "args": map[string]any{"uuid": foreign}},
	})
	if len(out) != 5 {
		t.Fatalf("vcon-mcp-client printed %v", out)
	}
	var tools []string
	for _, tool := range out[0]["tools"].([]any) {
		m := tool.(map[string]any)
		tools = append(tools, m["name"].(string))
		if m["name"] == "search_vcons" && len(m["properties"].([]any)) != 7 {
			t.Errorf("search_vcons' arguments: %v", m["properties"])
		}
	}
	slices.Sort(tools)
	if !slices.Equal(tools, []string{"get_lawful_basis", "get_vcon", "list_versions", "search_vcons", "vcon_capabilities"}) {
		t.Errorf("tools: %v", tools)
	}
	var found []string
	for _, u := range out[1]["uuids"].([]any) {
		found = append(found, u.(string))
	}
	slices.Sort(found)
	want := append(slices.Clone(stored), lawful)
	slices.Sort(want)
	if !slices.Equal(found, want) || out[1]["pages"] != float64(2) {
		t.Errorf("the search found %d uuids in %v pages, want the %d of acme in 2", len(found), out[1]["pages"], len(want))
	}
	if out[2]["isError"] != false || out[2]["text"] != string(first) {
		t.Errorf("get_vcon: %v, want the bytes stored", out[2])
	}
	if out[3]["text"] != string(first) {
		t.Errorf("vcon:// resource: %v", out[3])
	}
	if out[4]["isError"] != true || out[4]["text"] != "no such vCon" {
		t.Errorf("another tenant's uuid: %v", out[4])
	}

	refused := runTS(t, client, e, e.NewKey(tenant, "read").Token, "", nil)
	if msg, _ := refused[0]["connect_error"].(string); !strings.Contains(msg, "lacks the mcp scope") {
		t.Errorf("a key without mcp: %v", refused)
	}

	e.CLI("tenant", "set-lawful-basis", "acme", "enforce")
	mk := mcpKey(t, e, tenant, "marketing")
	denied := runTS(t, client, e, mk.Token, "", []map[string]any{{"tool": "get_vcon", "args": map[string]any{"uuid": lawful}}})
	if len(denied) != 2 || denied[1]["isError"] != true || !strings.Contains(denied[1]["text"].(string), "refuses the purpose") {
		t.Errorf("a purpose refused: %v", denied)
	}
	if want := `"action":"mcp_call tool=get_vcon purpose=marketing denied=purpose_refused","target":"` + lawful + `","status":451`; !strings.Contains(e.CLI("audit", "export", "--tenant", "acme"), want) {
		t.Errorf("the audit log lacks %s", want)
	}
}

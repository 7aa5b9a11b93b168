// The official TypeScript MCP client (@modelcontextprotocol/sdk) against a
// vcon-server, for server/mcpts_test.go: it connects over Streamable HTTP
// with a key, lists the tools, then runs the steps of a plan and prints
// one JSON line for each. Used as
//
//   vcon-mcp-client URL TOKEN PURPOSE PLAN
//
// with PURPOSE "" for none (sent as Vcon-Purpose) and PLAN a JSON array of
//   {"tool": NAME, "args": {...}}    a tool call: isError, its first text, structuredContent
//   {"pages": {...}}                 search_vcons with these arguments, page after page: every uuid, the pages
//   {"resource": URI}                a resource read: its first text
// A refused connection prints {"connect_error": ...} and exits 2. The
// server's CA comes from NODE_EXTRA_CA_CERTS.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, purpose, plan] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${token}` };
if (purpose) headers["Vcon-Purpose"] = purpose;
const out = (v) => process.stdout.write(JSON.stringify(v) + "\n");

const client = new Client({ name: "vcon-server-test", version: "1" });
try {
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
} catch (e) {
  out({ connect_error: String(e && e.message ? e.message : e) });
  process.exit(2);
}
const tools = await client.listTools();
out({ tools: tools.tools.map((t) => ({ name: t.name, properties: Object.keys(t.inputSchema.properties || {}) })) });

const text = (r) => (r.content && r.content[0] && r.content[0].text) || "";
for (const step of JSON.parse(plan || "[]")) {
  try {
    if (step.tool) {
      const r = await client.callTool({ name: step.tool, arguments: step.args || {} });
      out({ isError: !!r.isError, text: text(r), structured: r.structuredContent || null });
    } else if (step.pages) {
      const uuids = [];
      let cursor = null, pages = 0;
      do {
        const args = { ...step.pages };
        if (cursor) args.cursor = cursor;
        const r = await client.callTool({ name: "search_vcons", arguments: args });
        if (r.isError) throw new Error(text(r));
        uuids.push(...r.structuredContent.uuids);
        cursor = r.structuredContent.cursor;
        pages++;
      } while (cursor && pages < 10);
      out({ uuids, pages });
    } else if (step.resource) {
      const r = await client.readResource({ uri: step.resource });
      out({ text: r.contents[0].text });
    }
  } catch (e) {
    out({ error: String(e && e.message ? e.message : e) });
  }
}
await client.close();

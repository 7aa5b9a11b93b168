#!/bin/sh
# Installs the MCP clients that vcon-server's test of its MCP endpoint
# (server/mcpts_test.go) and docs/mcp.md run, from npm, pinned with their
# checksums in scripts/mcp/package-lock.json: the official TypeScript SDK
# (@modelcontextprotocol/sdk) with scripts/mcp/client.mjs, and the MCP
# Inspector (@modelcontextprotocol/inspector), for its command-line mode, behind
#
#   ${VCON_TOOLS:-$HOME/.cache/vcon-server/tools}/bin/vcon-mcp-client
#   ${VCON_TOOLS:-$HOME/.cache/vcon-server/tools}/bin/mcp-inspector
#
# Everything goes outside the repository. Run it again at any time: it
# reinstalls the package only when the lock file changed, and always
# refreshes client.mjs and the wrapper. Needs node (20 or later) and npm.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
src=$here/mcp
tools=${VCON_TOOLS:-$HOME/.cache/vcon-server/tools}
dest=$tools/mcp-node
bin=$tools/bin

node=$("$here/npm-lock-install.sh" install-mcp-client.sh "$src" "$dest" @modelcontextprotocol/sdk)
mkdir -p "$bin"

# client.mjs imports the SDK, so it lives next to node_modules.
cp "$src/client.mjs" "$dest/client.mjs.tmp"
mv "$dest/client.mjs.tmp" "$dest/client.mjs"

cat >"$bin/vcon-mcp-client.tmp" <<WRAP
#!/bin/sh
# Written by vcon-server's scripts/install-mcp-client.sh: the TypeScript MCP client of the tests.
exec "$node" "$dest/client.mjs" "\$@"
WRAP
chmod 0755 "$bin/vcon-mcp-client.tmp"
mv "$bin/vcon-mcp-client.tmp" "$bin/vcon-mcp-client"
cat >"$bin/mcp-inspector.tmp" <<WRAP
#!/bin/sh
# Written by vcon-server's scripts/install-mcp-client.sh: the MCP Inspector's command line.
exec "$node" "$dest/node_modules/@modelcontextprotocol/inspector/cli/build/cli.js" "\$@"
WRAP
chmod 0755 "$bin/mcp-inspector.tmp"
mv "$bin/mcp-inspector.tmp" "$bin/mcp-inspector"
echo "vcon-mcp-client: $bin/vcon-mcp-client; mcp-inspector: $bin/mcp-inspector"

#!/bin/sh
# Installs the MCP client that vcon-server's test of its MCP endpoint runs
# (server/mcpts_test.go): the official TypeScript SDK from npm
# (@modelcontextprotocol/sdk, pinned with its checksums in
# scripts/mcp/package-lock.json) and scripts/mcp/client.mjs, behind an
# executable
#
#   ${VCON_TOOLS:-$HOME/.cache/vcon-server/tools}/bin/vcon-mcp-client
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
echo "vcon-mcp-client: $bin/vcon-mcp-client"

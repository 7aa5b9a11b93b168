#!/bin/sh
# Installs Redocly's OpenAPI linter, which the tests run on
# docs/openapi.json with its recommended rules (test/openapi): the npm
# package @redocly/cli, pinned with its checksum in
# scripts/redocly/package-lock.json, behind an executable
#
#   ${VCON_TOOLS:-$HOME/.cache/vcon-server/tools}/bin/redocly
#
# Everything goes outside the repository. Run it again at any time: it
# reinstalls the package only when the lock file changed, and always
# refreshes the wrapper. The wrapper turns off the linter's telemetry and
# its update check, so that a lint never reaches the network. Needs node
# (20.19 or later) and npm.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
src=$here/redocly
tools=${VCON_TOOLS:-$HOME/.cache/vcon-server/tools}
dest=$tools/redocly-node
bin=$tools/bin

node=$("$here/npm-lock-install.sh" install-redocly.sh "$src" "$dest" @redocly/cli)
# @redocly/cli 2.77.0 runs on Node.js 20.19 or later (22.12 or later on 22).
"$node" -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 22 || (a === 22 && b >= 12) || (a === 20 && b >= 19) ? 0 : 1)' || {
	echo "install-redocly.sh: node $("$node" --version) is too old for @redocly/cli 2.77.0; install Node.js 20.19 or later (22.12 or later on 22)" >&2
	exit 1
}
mkdir -p "$bin"

# The wrapper names node by its full path, so it also runs where PATH is
# different (go test with a trimmed environment).
cat >"$bin/redocly.tmp" <<WRAPPER
#!/bin/sh
# Written by vcon-server's scripts/install-redocly.sh: Redocly's CLI, offline.
REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true exec "$node" "$dest/node_modules/@redocly/cli/bin/cli.js" "\$@"
WRAPPER
chmod 0755 "$bin/redocly.tmp"
mv "$bin/redocly.tmp" "$bin/redocly"

echo "redocly: $bin/redocly ($("$bin/redocly" --version 2>/dev/null))"

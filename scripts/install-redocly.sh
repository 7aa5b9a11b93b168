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

node=$(command -v node) || {
	echo "install-redocly.sh: node is not on PATH; install Node.js 20.19 or later (Debian: apt-get install nodejs npm)" >&2
	exit 1
}
command -v npm >/dev/null || {
	echo "install-redocly.sh: npm is not on PATH; install it (Debian: apt-get install npm)" >&2
	exit 1
}

# @redocly/cli 2.77.0 runs on Node.js 20.19 or later (22.12 or later on 22).
"$node" -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 22 || (a === 22 && b >= 12) || (a === 20 && b >= 19) ? 0 : 1)' || {
	echo "install-redocly.sh: node $("$node" --version) is too old for @redocly/cli 2.77.0; install Node.js 20.19 or later (22.12 or later on 22)" >&2
	exit 1
}

mkdir -p "$dest" "$bin"

# .installed-lock is written only after npm ci succeeded, so a cut-off
# install is redone by the next run.
if ! cmp -s "$src/package-lock.json" "$dest/.installed-lock" ||
	[ ! -f "$dest/node_modules/@redocly/cli/package.json" ]; then
	rm -f "$dest/.installed-lock"
	cp "$src/package.json" "$src/package-lock.json" "$dest/"
	(cd "$dest" && npm ci --no-audit --no-fund --loglevel=error)
	cp "$src/package-lock.json" "$dest/.installed-lock"
fi

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

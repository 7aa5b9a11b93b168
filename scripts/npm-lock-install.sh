#!/bin/sh
# Installs the npm packages of a lock file outside the repository, for the
# test tools that come from npm (scripts/install-duckdb.sh,
# scripts/install-redocly.sh):
#
#   scripts/npm-lock-install.sh NAME SRC DEST PACKAGE
#
# copies SRC/package.json and SRC/package-lock.json into DEST and runs
# npm ci there, only when the lock file changed since the last install
# that finished or PACKAGE (such as @duckdb/node-api) is missing, and
# prints node's full path. NAME is the calling script, for its messages.
set -eu

name=$1 src=$2 dest=$3 package=$4

node=$(command -v node) || {
	echo "$name: node is not on PATH; install Node.js (Debian: apt-get install nodejs npm)" >&2
	exit 1
}
command -v npm >/dev/null || {
	echo "$name: npm is not on PATH; install it (Debian: apt-get install npm)" >&2
	exit 1
}

mkdir -p "$dest"

# .installed-lock is written only after npm ci succeeded, so a cut-off
# install is redone by the next run.
if ! cmp -s "$src/package-lock.json" "$dest/.installed-lock" || [ ! -f "$dest/node_modules/$package/package.json" ]; then
	rm -f "$dest/.installed-lock"
	cp "$src/package.json" "$src/package-lock.json" "$dest/"
	(cd "$dest" && npm ci --no-audit --no-fund --loglevel=error) >&2
	cp "$src/package-lock.json" "$dest/.installed-lock"
fi
echo "$node"

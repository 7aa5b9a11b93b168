#!/bin/sh
# Installs the DuckDB that vcon-server's tests read Parquet files with: the
# DuckDB library from npm (@duckdb/node-api, pinned with its checksums in
# scripts/duckdb/package-lock.json) and scripts/duckdb/duckdb.mjs, a small
# stand-in for the duckdb command-line program, behind an executable
#
#   ${VCON_TOOLS:-$HOME/.cache/vcon-server/tools}/bin/duckdb
#
# Everything goes outside the repository. Run it again at any time: it
# reinstalls the package only when the lock file changed, and always
# refreshes duckdb.mjs and the wrapper. Needs node (18 or later) and npm.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
src=$here/duckdb
tools=${VCON_TOOLS:-$HOME/.cache/vcon-server/tools}
dest=$tools/duckdb-node
bin=$tools/bin

node=$("$here/npm-lock-install.sh" install-duckdb.sh "$src" "$dest" @duckdb/node-api)
mkdir -p "$bin"

# duckdb.mjs imports @duckdb/node-api, so it lives next to node_modules.
cp "$src/duckdb.mjs" "$dest/duckdb.mjs.tmp"
mv "$dest/duckdb.mjs.tmp" "$dest/duckdb.mjs"

# The wrapper names node by its full path, so it also runs where PATH is
# different (sudo, systemd, go test with a trimmed environment).
cat >"$bin/duckdb.tmp" <<EOF
#!/bin/sh
# Written by vcon-server's scripts/install-duckdb.sh: a DuckDB stand-in.
exec "$node" "$dest/duckdb.mjs" "\$@"
EOF
chmod 0755 "$bin/duckdb.tmp"
mv "$bin/duckdb.tmp" "$bin/duckdb"

"$bin/duckdb" --version >/dev/null
echo "duckdb: $bin/duckdb ($("$bin/duckdb" --version))"

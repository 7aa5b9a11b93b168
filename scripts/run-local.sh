#!/usr/bin/env bash
# `make run`: a vcon-server on this machine, on the embedded default (a data
# directory, SQLite, a self-signed certificate), with a demo tenant and
# keys. Everything lives in .local/ (ignored by git), and so does what the
# printed commands write: nothing else in the repository is touched. Run it
# again to reuse it, or delete .local/ to start over.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/bin/vcon-server
dir=$root/.local
port=${VCON_PORT:-8443}
config=$dir/vcon-server.toml
mkdir -p "$dir"
chmod 0700 "$dir"

if [ ! -f "$config" ]; then
  cat > "$config" <<TOML
# Written by scripts/run-local.sh. Relative paths are relative to this file.
listen = "127.0.0.1:$port"
data_dir = "data"
master_key = "master.key"

[tls]
cert = "cert.pem"
key = "key.pem"
TOML
fi

"$bin" init --config "$config" >/dev/null

if [ ! -f "$dir/demo.env" ]; then
  "$bin" tenant create demo --config "$config" >/dev/null
  key() { "$bin" key create "$@" --config "$config" | jq -r .token; }
  {
    echo "RECORDER=$(key --tenant demo --scope write --label demo-recorder)"
    echo "MONITOR=$(key --tenant demo --scope read --label demo-monitor)"
    echo "DELETER=$(key --tenant demo --scope delete --label demo-deleter)"
    echo "OPS=$(key --operator --label demo-operator)"
  } > "$dir/demo.env"
  chmod 0600 "$dir/demo.env"
fi
# shellcheck disable=SC1091
. "$dir/demo.env"

cat <<TXT
vcon-server is starting on https://localhost:$port with its data in $dir.
Demo tenant "demo"; its keys (also in .local/demo.env):

  RECORDER=$RECORDER
  MONITOR=$MONITOR
  DELETER=$DELETER
  OPS=$OPS

In another shell, store a vCon and read it back:

  cd $root && . .local/demo.env
  UUID=\$(cat /proc/sys/kernel/random/uuid)
  printf '{"vcon":"0.4.0","uuid":"%s","subject":"Hello","parties":[{"tel":"+15555550101"}],"dialog":[]}' "\$UUID" > .local/hello.vcon
  curl -sS --cacert .local/cert.pem https://localhost:$port/vcons \\
    -H "Authorization: Bearer \$RECORDER" -H "Content-Type: application/vcon" --data-binary @.local/hello.vcon
  curl -sS --cacert .local/cert.pem https://localhost:$port/vcons/\$UUID -H "Authorization: Bearer \$MONITOR"

Stop it with Ctrl-C.
TXT
exec "$bin" serve --config "$config"

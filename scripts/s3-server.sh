#!/usr/bin/env bash
# A local S3 server for people and docs: versitygw on loopback, with TLS
# from a CA this script makes, data and keys kept in DIR.
#
#   scripts/s3-server.sh start DIR   # start (idempotent), then print env lines
#   scripts/s3-server.sh env DIR     # print the env lines again
#   scripts/s3-server.sh stop DIR    # stop it; DIR (data, keys, CA) stays
#
#   eval "$(scripts/s3-server.sh start /tmp/s3)"
#
# The env lines set VCON_S3_ENDPOINT, VCON_S3_REGION, VCON_S3_ACCESS_KEY,
# VCON_S3_SECRET_KEY and VCON_S3_CA_FILE. versitygw comes from
# scripts/install-test-tools.sh (or VCON_TEST_VERSITYGW, or PATH). Set
# VCON_S3_PORT to choose the port (default 7070).
set -euo pipefail

usage() {
  echo "usage: $0 start|stop|env DIR" >&2
  exit 2
}
[ $# -eq 2 ] || usage
cmd=$1
mkdir -p "$2"
DIR=$(cd "$2" && pwd)
PORT=${VCON_S3_PORT:-7070}

find_versitygw() {
  if [ -n "${VCON_TEST_VERSITYGW:-}" ]; then echo "$VCON_TEST_VERSITYGW"; return; fi
  local tools="${VCON_TOOLS:-$HOME/.cache/vcon-server/tools}/bin/versitygw"
  if [ -x "$tools" ]; then echo "$tools"; return; fi
  command -v versitygw || {
    echo "s3-server: no versitygw: run scripts/install-test-tools.sh versitygw" >&2
    exit 1
  }
}

running() {
  [ -f "$DIR/versitygw.pid" ] && kill -0 "$(cat "$DIR/versitygw.pid")" 2>/dev/null
}

make_tls() {
  [ -f "$DIR/tls/cert.pem" ] && return 0
  mkdir -p "$DIR/tls"
  chmod 700 "$DIR/tls"
  (
    cd "$DIR/tls"
    openssl ecparam -name prime256v1 -genkey -noout -out ca.key 2>/dev/null
    openssl req -x509 -new -key ca.key -days 365 -subj "/CN=vcon-server local S3 CA" \
      -addext "basicConstraints=critical,CA:TRUE,pathlen:0" \
      -addext "keyUsage=critical,keyCertSign,cRLSign" -out ca.pem 2>/dev/null
    openssl ecparam -name prime256v1 -genkey -noout -out key.pem 2>/dev/null
    openssl req -new -key key.pem -subj "/CN=localhost" -out cert.csr 2>/dev/null
    printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature" \
      "extendedKeyUsage=serverAuth" "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost" >ext.cnf
    openssl x509 -req -in cert.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 365 \
      -extfile ext.cnf -out cert.pem 2>/dev/null
    rm -f cert.csr ext.cnf ca.srl
    chmod 600 ca.key key.pem
  )
}

make_keys() {
  [ -f "$DIR/secret_key" ] && return 0
  (umask 077 && openssl rand -hex 20 >"$DIR/secret_key")
  echo "vcon-local" >"$DIR/access_key"
}

print_env() {
  cat <<EOF
export VCON_S3_ENDPOINT=https://127.0.0.1:$(cat "$DIR/port")
export VCON_S3_REGION=us-east-1
export VCON_S3_ACCESS_KEY=$(cat "$DIR/access_key")
export VCON_S3_SECRET_KEY=$(cat "$DIR/secret_key")
export VCON_S3_CA_FILE=$DIR/tls/ca.pem
EOF
}

case $cmd in
  start)
    if running; then
      echo "s3-server: already running (pid $(cat "$DIR/versitygw.pid"))" >&2
      print_env
      exit 0
    fi
    bin=$(find_versitygw)
    make_tls
    make_keys
    mkdir -p "$DIR/data" "$DIR/versions"
    echo "$PORT" >"$DIR/port"
    # --keep-alive: without it each request opens a new TLS connection and
    # the gateway is several times slower. --versioning-dir: without it
    # versioning cannot be turned on for a bucket.
    ROOT_ACCESS_KEY=$(cat "$DIR/access_key") ROOT_SECRET_KEY=$(cat "$DIR/secret_key") \
      nohup "$bin" --port "127.0.0.1:$PORT" --cert "$DIR/tls/cert.pem" --key "$DIR/tls/key.pem" \
      --keep-alive --quiet posix --versioning-dir "$DIR/versions" "$DIR/data" \
      >"$DIR/versitygw.log" 2>&1 </dev/null &
    echo $! >"$DIR/versitygw.pid"
    for _ in $(seq 100); do
      if curl -s -o /dev/null --cacert "$DIR/tls/ca.pem" "https://127.0.0.1:$PORT/"; then
        echo "s3-server: versitygw answering on https://127.0.0.1:$PORT (pid $(cat "$DIR/versitygw.pid"), log $DIR/versitygw.log)" >&2
        print_env
        exit 0
      fi
      if ! running; then break; fi
      sleep 0.1
    done
    echo "s3-server: versitygw did not start; its log:" >&2
    cat "$DIR/versitygw.log" >&2
    exit 1
    ;;
  stop)
    if running; then
      pid=$(cat "$DIR/versitygw.pid")
      kill "$pid"
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      echo "s3-server: stopped pid $pid" >&2
    else
      echo "s3-server: not running" >&2
    fi
    rm -f "$DIR/versitygw.pid"
    ;;
  env)
    [ -f "$DIR/port" ] || { echo "s3-server: nothing started in $DIR" >&2; exit 1; }
    print_env
    ;;
  *) usage ;;
esac

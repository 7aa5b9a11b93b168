#!/usr/bin/env bash
# Installs the real servers the tests run against (S3 and KMS), built from
# source with `go install` (the only registry this project's machines reach
# is the Go module proxy), into ${VCON_TOOLS:-$HOME/.cache/vcon-server/tools}/bin.
# That folder is outside the repository, so one machine builds each tool
# once. Idempotent: a tool already there is kept.
#
#   scripts/install-test-tools.sh            # every server
#   scripts/install-test-tools.sh versitygw  # just one
#
# versitygw (Apache-2.0) takes about 2 minutes to build cold; MinIO (AGPL)
# several; local-kms (MIT) half a minute. MinIO and the KMS servers are
# only ever run as external programs by the tests (test/kit/s3test,
# test/kit/kmstest), never imported into the project's code.
set -euo pipefail

VERSITYGW_VERSION=v1.8.0
# MinIO's release tags (RELEASE.2025-...) are not semantic versions, so the
# module proxy knows it by pseudo-versions. This is what @latest resolved
# to when the tests were written; pinned so every machine tests the same
# server. Set VCON_MINIO_VERSION=latest to try the newest.
MINIO_VERSION=${VCON_MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}

# The KMS servers of the key-wrapping tests (internal/kms, test/kit/kmstest).
# local-kms, an AWS KMS API server, has no tagged release on the module
# proxy either: this is the commit the tests were written against.
LOCALKMS_VERSION=v0.0.0-20260228092603-2a5e92d09ab6

TOOLS="${VCON_TOOLS:-$HOME/.cache/vcon-server/tools}"
BIN="$TOOLS/bin"
mkdir -p "$BIN"

if ! command -v go >/dev/null 2>&1; then
  echo "install-test-tools: go is not on PATH" >&2
  exit 1
fi

# installed_version prints the module version a Go binary was built from.
installed_version() {
  go version -m "$1" 2>/dev/null | awk '$1 == "mod" { print $3; exit }'
}

install_tool() { # name module version
  local name=$1 module=$2 version=$3
  if [ -x "$BIN/$name" ]; then
    local have
    have=$(installed_version "$BIN/$name")
    if [ "$version" = latest ] || [ "$have" = "$version" ]; then
      echo "install-test-tools: $name ${have:-} already in $BIN (kept)"
      return 0
    fi
    echo "install-test-tools: $name in $BIN is ${have:-of unknown version}, want $version: rebuilding"
  fi
  echo "install-test-tools: building $name from $module@$version into $BIN ..."
  local start=$SECONDS
  # Build into a temporary folder, then move into place: an interrupted
  # build never leaves a half-written binary that the next run would keep.
  local tmp
  tmp=$(mktemp -d "$TOOLS/.build.XXXXXX")
  if ! GOBIN="$tmp" GOFLAGS= go install "$module@$version"; then
    rm -rf "$tmp"
    echo "install-test-tools: building $name failed" >&2
    return 1
  fi
  mv "$tmp/$name" "$BIN/$name"
  rm -rf "$tmp"
  echo "install-test-tools: installed $BIN/$name in $((SECONDS - start))s"
}

want=("$@")
if [ ${#want[@]} -eq 0 ]; then
  want=(versitygw minio local-kms)
fi
for tool in "${want[@]}"; do
  case $tool in
    versitygw) install_tool versitygw github.com/versity/versitygw/cmd/versitygw "$VERSITYGW_VERSION" ;;
    minio) install_tool minio github.com/minio/minio "$MINIO_VERSION" ;;
    local-kms) install_tool local-kms github.com/nsmithuk/local-kms "$LOCALKMS_VERSION" ;;
    *) echo "install-test-tools: unknown tool $tool (want versitygw, minio or local-kms)" >&2; exit 2 ;;
  esac
done
echo "install-test-tools: done; the tests find the servers in $BIN (or set VCON_TEST_VERSITYGW / VCON_TEST_MINIO / VCON_TEST_LOCALKMS)"

#!/usr/bin/env bash
# Installs the real servers the tests run against (S3: versitygw, MinIO;
# KMS: local-kms, HashiCorp Vault), built from source with the go command
# (the only registry this project's machines reach is the Go module proxy),
# into ${VCON_TOOLS:-$HOME/.cache/vcon-server/tools}/bin.
# That folder is outside the repository, so one machine builds each tool
# once. Idempotent: a tool already there is kept.
#
#   scripts/install-test-tools.sh            # all of them
#   scripts/install-test-tools.sh versitygw  # just one
#
# versitygw (Apache-2.0) takes about 2 minutes to build cold; MinIO (AGPL)
# several; local-kms (MIT) half a minute; Vault (BUSL-1.1) about 23
# minutes (install_vault). MinIO and the KMS servers are only ever run as
# external programs by the tests (test/kit/s3test, test/kit/kmstest),
# never imported into the project's code.
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

# --- HashiCorp Vault -------------------------------------------------------
# `go install github.com/hashicorp/vault@vX` is refused: Vault's go.mod
# replaces its api and sdk modules by their in-tree copies (./api, ./sdk).
# So the build goes through a throwaway wrapper module, written here into a
# temporary folder (never a module inside the repository, where
# `go test ./...` would see it), that requires Vault and the *published*
# api and sdk its go.mod names, plus Vault's two other replace lines.
#
# That only compiles where the published sdk and api are what the release's
# in-tree copies were. v1.21.1 is the newest release where they are: its
# go.mod names sdk v0.20.0 and api v1.22.0, and it compiles with them.
# v1.21.2 calls sdk methods that sdk v0.20.0 lacks
# (framework.Backend.TryRecordObservationWithRequest); v1.21.3 and v1.21.4
# need an sdk with that observations API but the old two-argument
# framework.Backend.ActivationFunc, and no published sdk (v0.19.0 to
# v0.25.1) has both. The pseudo-versions of the release commits themselves
# are not served by the module proxy this project reaches.
#
# Cold (empty module and build caches, 2 busy cores): 23 minutes, of which
# about 4 fetch 3.8 GB of modules; the build cache takes 3.9 GB more. The
# stripped binary is 361 MB; a dev server answers in about half a second.
VAULT_VERSION=v1.21.1
VAULT_SDK_VERSION=v0.20.0
VAULT_API_VERSION=v1.22.0

# vault_stamp prints what a vault binary was built from: Vault's version
# and the sdk and api compiled into it (from go version -m).
vault_stamp() {
  go version -m "$1" 2>/dev/null | awk '
    $1 == "mod" && $2 == "github.com/hashicorp/vault" { v = $3 }
    $1 == "dep" && $2 == "github.com/hashicorp/vault/sdk" { s = $3 }
    $1 == "dep" && $2 == "github.com/hashicorp/vault/api" { a = $3 }
    END { if (v != "") print v " sdk " s " api " a }'
}

install_vault() {
  local want="$VAULT_VERSION sdk $VAULT_SDK_VERSION api $VAULT_API_VERSION"
  if [ -x "$BIN/vault" ]; then
    local have
    have=$(vault_stamp "$BIN/vault")
    if [ "$have" = "$want" ]; then
      echo "install-test-tools: vault $have already in $BIN (kept)"
      return 0
    fi
    echo "install-test-tools: vault in $BIN is ${have:-of unknown version}, want $want: rebuilding"
  fi
  echo "install-test-tools: building vault $want into $BIN through a wrapper module (about 23 minutes cold) ..."
  local start=$SECONDS
  local tmp
  tmp=$(mktemp -d "$TOOLS/.build.XXXXXX")
  cat >"$tmp/go.mod" <<GOMOD
// Written by scripts/install-test-tools.sh to build the vault binary; removed after.
module vcon-server.test/vaultbuild

go 1.25.3

tool github.com/hashicorp/vault

require (
	github.com/hashicorp/vault $VAULT_VERSION
	github.com/hashicorp/vault/api $VAULT_API_VERSION
	github.com/hashicorp/vault/sdk $VAULT_SDK_VERSION
)

// Vault's own replace lines, less those that point into its tree.
replace github.com/99designs/keyring => github.com/Jeffail/keyring v1.2.3

replace github.com/ma314smith/signedxml v1.1.1 => github.com/moov-io/signedxml v1.1.1
GOMOD
  # As Vault's release builds are: without cgo. Stripped (-s -w): with its
  # symbols the binary is half a gigabyte; go version -m still reads it.
  # The checks after tidy refuse a module graph that moved sdk or api off
  # their pins (a requirement of a plugin raising them).
  if ! (cd "$tmp" && export GOFLAGS= GOWORK=off CGO_ENABLED=0 &&
    go mod tidy &&
    [ "$(go list -m -f '{{.Version}}' github.com/hashicorp/vault/sdk)" = "$VAULT_SDK_VERSION" ] &&
    [ "$(go list -m -f '{{.Version}}' github.com/hashicorp/vault/api)" = "$VAULT_API_VERSION" ] &&
    go build -trimpath -ldflags='-s -w' -o "$tmp/vault" github.com/hashicorp/vault); then
    rm -rf "$tmp"
    echo "install-test-tools: building vault failed" >&2
    return 1
  fi
  mv "$tmp/vault" "$BIN/vault"
  rm -rf "$tmp"
  echo "install-test-tools: installed $BIN/vault ($("$BIN/vault" version)) in $((SECONDS - start))s"
}
# --- end of HashiCorp Vault ------------------------------------------------

want=("$@")
if [ ${#want[@]} -eq 0 ]; then
  want=(versitygw minio local-kms vault)
fi
for tool in "${want[@]}"; do
  case $tool in
    versitygw) install_tool versitygw github.com/versity/versitygw/cmd/versitygw "$VERSITYGW_VERSION" ;;
    minio) install_tool minio github.com/minio/minio "$MINIO_VERSION" ;;
    local-kms) install_tool local-kms github.com/nsmithuk/local-kms "$LOCALKMS_VERSION" ;;
    vault) install_vault ;;
    *) echo "install-test-tools: unknown tool $tool (want versitygw, minio, local-kms or vault)" >&2; exit 2 ;;
  esac
done
echo "install-test-tools: done; the tests find the servers in $BIN (or set VCON_TEST_VERSITYGW / VCON_TEST_MINIO / VCON_TEST_LOCALKMS / VCON_TEST_VAULT)"

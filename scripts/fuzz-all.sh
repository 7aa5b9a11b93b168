#!/usr/bin/env bash
# Runs every Go fuzz target of the module for SECONDS each (default 10),
# one after another, and fails when any finds an input that breaks it. A
# failing input is written under the package's testdata/fuzz/<Target>/:
# commit it, so that every later `go test` replays it.
#
#   scripts/fuzz-all.sh 5      # CI: a few seconds each
#   scripts/fuzz-all.sh 300    # before a release
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
case $secs in '' | *[!0-9]*) echo "usage: $0 SECONDS" >&2; exit 2 ;; esac

failed=()
ran=0
# Every "func FuzzX(f *testing.F)" in a test file, as "dir FuzzX".
while read -r file name; do
  dir=./$(dirname "$file")
  ran=$((ran + 1))
  echo "== $name in $dir (${secs}s)"
  # The fuzz time bounds the fuzzing; the timeout bounds building and the
  # seed corpus too, so a hang cannot stall CI.
  if ! timeout $((secs + 300)) go test -run '^$' -fuzz "^${name}\$" -fuzztime "${secs}s" "$dir" </dev/null 2>&1 | tail -n 25; then
    failed+=("$name ($dir)")
  fi
done < <(git ls-files '*_test.go' | xargs grep -Ho '^func Fuzz[A-Za-z0-9_]*(f \*testing\.F)' | sed -E 's/:func (Fuzz[A-Za-z0-9_]*).*/ \1/' | sort)

if [ "$ran" -eq 0 ]; then
  echo "fuzz-all: no fuzz targets found" >&2
  exit 1
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz-all: ${#failed[@]} of $ran targets failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz-all: $ran targets, ${secs}s each, all passed"

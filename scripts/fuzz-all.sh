#!/usr/bin/env bash
# Runs every Go fuzz target of the module for SECONDS each (default 10),
# one after another, and fails when any finds an input that breaks it. A
# failing input is written under the package's testdata/fuzz/<Target>/:
# commit it, so that every later `go test` replays it.
#
#   scripts/fuzz-all.sh 5      # CI: a few seconds each
#   scripts/fuzz-all.sh 300    # before a release
#
# Go's fuzz coordinator can end a duration-bounded run with a bare
# "context deadline exceeded" when a starved worker has not answered by the
# deadline; no input is written then, because none failed. Such a run is
# tried again (twice at most); anything else that fails, fails.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
case $secs in '' | *[!0-9]*) echo "usage: $0 SECONDS" >&2; exit 2 ;; esac

log=$(mktemp)
trap 'rm -f "$log"' EXIT

# fuzz DIR NAME: 0 passed, 1 failed, 2 ended by the coordinator's deadline
# race with no failing input.
fuzz() {
  # The fuzz time bounds the fuzzing; the timeout bounds building and the
  # seed corpus too, so a hang cannot stall CI.
  if timeout $((secs + 300)) go test -run '^$' -fuzz "^$2\$" -fuzztime "${secs}s" "$1" </dev/null >"$log" 2>&1; then
    tail -n 25 "$log"
    return 0
  fi
  tail -n 25 "$log"
  if grep -q 'context deadline exceeded' "$log" &&
    ! grep -Eq 'Failing input written|panic:|fuzzing process hung|_test\.go:[0-9]+:' "$log"; then
    return 2
  fi
  return 1
}

failed=()
ran=0
# Every "func FuzzX(f *testing.F)" in a test file, as "dir FuzzX".
while read -r file name; do
  dir=./$(dirname "$file")
  ran=$((ran + 1))
  echo "== $name in $dir (${secs}s)"
  for try in 1 2 3; do
    rc=0
    fuzz "$dir" "$name" || rc=$?
    [ "$rc" -eq 2 ] || break
    echo "fuzz-all: $name ended on the fuzz deadline with no failing input (try $try of 3)"
  done
  [ "$rc" -eq 0 ] || failed+=("$name ($dir)")
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

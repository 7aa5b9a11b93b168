#!/usr/bin/env bash
# release-check: proves `make release` is reproducible and what it ships is
# what the docs promise.
#
#   scripts/release-check.sh [--tree] [WORKDIR]
#
# It builds the release twice, from two copies of the source at different
# paths, the second with an empty Go build cache, and requires:
#   - identical SHA256SUMS (the same source gives the same bytes, whatever
#     the checkout's path or the cache held);
#   - static binaries: no ELF interpreter, no shared library needed, built
#     with CGO_ENABLED=0 and -trimpath, and no build path inside;
#   - the version stamped with -ldflags -X: `vcon-server version` prints it
#     (run for the host's architecture; in the other binary the stamped
#     text is looked for, since -trimpath leaves -ldflags out of the build
#     information).
#
# The source is the commit HEAD (`git archive`), so edits in progress
# cannot change between the two builds; --tree builds the working tree's
# files as they are instead. VERSION overrides the version stamped
# (default: git describe of HEAD). The binaries stay in WORKDIR/a and
# WORKDIR/b (default: a new temporary folder, removed at the end unless
# WORKDIR was given). Needs git, make and go; readelf or file if present.
set -euo pipefail

tree=0
if [ "${1:-}" = "--tree" ]; then
	tree=1
	shift
fi
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-}
keep=1
if [ -z "$work" ]; then
	work=$(mktemp -d)
	keep=0
fi
mkdir -p "$work"
work=$(cd "$work" && pwd)
cleanup() {
	# The cache holds read-only files (go's module cache does); the build
	# cache does not, but be safe.
	chmod -R u+w "$work/gocache" 2>/dev/null || true
	rm -rf "$work/src-a" "$work/src-b" "$work/gocache"
	if [ "$keep" = 0 ]; then rm -rf "$work"; fi
}
trap cleanup EXIT

fail() {
	echo "release-check: FAIL: $*" >&2
	exit 1
}

if [ "$tree" = 1 ]; then
	version=${VERSION:-$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)}
else
	version=${VERSION:-$(git -C "$root" describe --tags --always 2>/dev/null || echo dev)}
fi

snapshot() {
	local dest=$1
	rm -rf "$dest"
	mkdir -p "$dest"
	if [ "$tree" = 1 ]; then
		# Tracked and new files, as they are now; not what .gitignore hides.
		(cd "$root" && git ls-files -z --cached --others --exclude-standard |
			while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
			tar --null -T - -cf -) | tar -xf - -C "$dest"
	else
		git -C "$root" archive --format=tar HEAD | tar -xf - -C "$dest"
	fi
}

build() {
	local name=$1
	shift
	local src="$work/src-$name"
	snapshot "$src"
	echo "release-check: building $version in $src $*" >&2
	(cd "$src" && env "$@" make --no-print-directory release VERSION="$version" >/dev/null) ||
		fail "make release failed in $src"
	rm -rf "${work:?}/$name"
	cp -R "$src/dist" "$work/$name"
}

build a
# The second build: another path, and a cache that holds nothing, so an
# output that depended on either would differ.
build b GOCACHE="$work/gocache"

if ! cmp -s "$work/a/SHA256SUMS" "$work/b/SHA256SUMS"; then
	diff "$work/a/SHA256SUMS" "$work/b/SHA256SUMS" >&2 || true
	fail "two builds of the same source differ"
fi
for arch in amd64 arm64; do
	[ -f "$work/a/vcon-server-linux-$arch" ] || fail "make release made no vcon-server-linux-$arch"
done
(cd "$work/a" && sha256sum --quiet -c SHA256SUMS) || fail "SHA256SUMS does not match the binaries"

case $(uname -m) in
x86_64 | amd64) host=amd64 ;;
aarch64 | arm64) host=arm64 ;;
*) host=none ;;
esac

for arch in amd64 arm64; do
	bin="$work/a/vcon-server-linux-$arch"
	info=$(go version -m "$bin") || fail "go version -m $bin"
	grep -q $'\tbuild\tCGO_ENABLED=0$' <<<"$info" || fail "$arch: not built with CGO_ENABLED=0"
	grep -q $'\tbuild\t-trimpath=true$' <<<"$info" || fail "$arch: not built with -trimpath"
	# With -trimpath the build information leaves -ldflags out: look for the
	# stamped text itself (vcon-server version proves it below on the host).
	grep -qaF "$version" "$bin" || fail "$arch: the version $version is not stamped (-ldflags -X)"
	grep -q $'\tbuild\tGOARCH='"$arch"'$' <<<"$info" || fail "$arch: built for another architecture"
	if command -v readelf >/dev/null; then
		if readelf -lW "$bin" | grep -q 'INTERP'; then fail "$arch: the binary asks for an ELF interpreter (dynamically linked)"; fi
		if readelf -dW "$bin" 2>/dev/null | grep -q '(NEEDED)'; then fail "$arch: the binary needs shared libraries"; fi
	elif command -v file >/dev/null; then
		file -b "$bin" | grep -q 'statically linked' || fail "$arch: file says: $(file -b "$bin")"
	else
		echo "release-check: neither readelf nor file is installed: static linking checked from the build information only" >&2
	fi
	for src in "$work/src-a" "$work/src-b"; do
		if grep -qF "$src" "$bin"; then fail "$arch: the binary holds the build path $src"; fi
	done
	if [ "$arch" = "$host" ]; then
		out=$("$bin" version) || fail "$arch: vcon-server version failed"
		want="{\"arch\":\"$arch\",\"go\":\"$(go env GOVERSION)\",\"os\":\"linux\",\"version\":\"$version\"}"
		[ "$out" = "$want" ] || fail "$arch: vcon-server version printed $out, want $want"
	fi
done

echo "release-check: ok: $version, two builds identical, static, stamped"
cat "$work/a/SHA256SUMS"

#!/usr/bin/env bash
# make release: the four binaries (walletsvc, notifier, providersim, demo), static
# (CGO_ENABLED=0) and built with -trimpath, for linux/amd64 and linux/arm64, into dist/; a
# CycloneDX SBOM of each binary (<binary>.cdx.json, by cyclonedx-gomod, pinned below, from
# the modules the binary records); and SHA256SUMS over all of them (sha256sum -c SHA256SUMS).
#
# The commit, whether the tree had changes, and the version (git describe) are recorded with
# the linker (-ldflags -X .../internal/buildinfo...), not by the Go toolchain's own stamp,
# which is turned off (-buildvcs=false): it finds no repository in a git worktree (whose .git
# is a file), and a release must say its commit, the same way, wherever it is built. Each binary's --version and /metrics
# (walletsaga_build_info) print them. A tree with changes is refused unless
# RELEASE_ALLOW_MODIFIED=1 (its binaries then say "-modified").
#
#   RELEASE_DIR        where to write (default dist; emptied first)
#   RELEASE_PLATFORMS  GOOS/GOARCH pairs (default "linux/amd64 linux/arm64")
#   RELEASE_BINARIES   which of the binaries (default all four)
#   RELEASE_VERSION    the version to record (default: git describe --tags --always --dirty)
set -Eeuo pipefail
export GOTOOLCHAIN=go1.27.3
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
GO="${GO:-go}"
DIST="${RELEASE_DIR:-dist}"
PLATFORMS="${RELEASE_PLATFORMS:-linux/amd64 linux/arm64}"
BINARIES="${RELEASE_BINARIES:-walletsvc notifier providersim demo}"
CYCLONEDX_VERSION=v1.10.0
RUN="${WALLETSAGA_RUN_DIR:-$ROOT/.run}"
CYCLONEDX="$RUN/tools/cyclonedx-gomod-$CYCLONEDX_VERSION/cyclonedx-gomod"
say() { printf 'release: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

command -v git >/dev/null || die "git is needed: the release records its commit"
revision="$(git rev-parse HEAD)" || die "not a git checkout: the release records its commit"
modified=false
if [ -n "$(git status --porcelain)" ]; then
	modified=true
	[ "${RELEASE_ALLOW_MODIFIED:-}" = 1 ] || die "the tree has changes (git status): commit them, or RELEASE_ALLOW_MODIFIED=1 for binaries that say -modified"
fi
version="${RELEASE_VERSION:-$(git describe --tags --match 'v*' --always --dirty)}"

if [ ! -x "$CYCLONEDX" ]; then
	say "installing cyclonedx-gomod $CYCLONEDX_VERSION into $(dirname "$CYCLONEDX")"
	GOBIN="$(dirname "$CYCLONEDX")" GOOS='' GOARCH='' "$GO" install "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$CYCLONEDX_VERSION"
fi

pkg=github.com/walletsaga/walletsaga/internal/buildinfo
ldflags="-X $pkg.version=$version -X $pkg.revision=$revision -X $pkg.modified=$modified"
rm -rf "$DIST"
mkdir -p "$DIST"
for platform in $PLATFORMS; do
	goos="${platform%/*}" goarch="${platform#*/}"
	for bin in $BINARIES; do
		out="$DIST/$bin-$version-$goos-$goarch"
		say "$out"
		CGO_ENABLED=0 GOOS="$goos" GOARCH="$goarch" "$GO" build -trimpath -buildvcs=false -ldflags="$ldflags" -o "$out" "./cmd/$bin"
		# bin mode reads the modules the binary records; GOOS/GOARCH name its platform in
		# the package URLs.
		GOOS="$goos" GOARCH="$goarch" "$CYCLONEDX" bin -json -version "$version" -output "$out.cdx.json" "$out"
	done
done
(cd "$DIST" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS)
say "$DIST: version $version, revision $revision$([ "$modified" = true ] && echo ' (modified)')"

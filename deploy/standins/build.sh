#!/usr/bin/env bash
# Builds local stand-ins for the upstream images docker-compose.yml and the Dockerfile name,
# for a machine that reaches no image registry (as the compose test's, scripts/compose-test.sh):
#
#   debian:bookworm        the base of every stand-in, made here: debootstrap --variant=minbase
#                          from Debian's packages (the mirror apt is configured with), imported
#   POSTGRES_IMAGE         postgres/    Debian's PostgreSQL
#   ROCKETMQ_IMAGE         rocketmq/    RocketMQ's jars from Maven Central (scripts/services.sh's)
#   PROMETHEUS_IMAGE       prometheus/  Debian's Prometheus
#   GO_IMAGE               golang/      the Go toolchain from the module proxy (the go command's)
#   RUNTIME_IMAGE          busybox/     Debian's static busybox (trixie's)
#
# Grafana has no stand-in: it is not among Debian's packages, nor in any registry this machine
# reaches. The compose file keeps it in the profile grafana, which the compose test leaves out.
#
# Each Dockerfile's first comment says which contract of the upstream image it follows. The
# stand-ins are named walletsaga-standin/<name>:<version of what they hold>; a stand-in whose
# inputs did not change since it was built is not built again. The script prints the
# variables that point the compose file and the Dockerfile at them:
#
#   eval "$(scripts/docker.sh env)"; eval "$(deploy/standins/build.sh)"
#
# Every build runs with the host's network (the package registries); nothing runs with it after.
set -Eeuo pipefail
export GOTOOLCHAIN=go1.27.3
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/deploy/standins"
RUN="${WALLETSAGA_RUN_DIR:-$ROOT/.run}"
WORK="$RUN/docker/standins"
DOCKER="${DOCKER:-/usr/bin/docker}"
BASE=debian:bookworm
GO_VERSION=1.27.3
say() { printf 'standins: %s\n' "$*" >&2; }
die() { printf 'standins: ERROR: %s\n' "$*" >&2; exit 1; }

[ -n "${DOCKER_HOST:-}" ] || die "DOCKER_HOST is not set: eval \"\$(scripts/docker.sh env)\" first"
"$DOCKER" version >/dev/null 2>&1 || die "no Docker engine answers at $DOCKER_HOST"
mkdir -p "$WORK"

have_image() { "$DOCKER" image inspect "$1" >/dev/null 2>&1; }

# base: debian:bookworm from Debian's packages.
base() {
	if have_image "$BASE"; then
		return 0
	fi
	command -v debootstrap >/dev/null || die "no debootstrap: scripts/docker.sh install"
	local mirror t0=$SECONDS rootfs="$WORK/rootfs"
	# The mirror this machine's apt uses for bookworm's main (debootstrap's default otherwise).
	mirror="$(apt-get indextargets --format '$(RELEASE) $(COMPONENT) $(REPO_URI)' 2>/dev/null | awk '$1 == "bookworm" && $2 == "main" { print $3; exit }')"
	say "making $BASE: debootstrap --variant=minbase bookworm${mirror:+ from $mirror}"
	rm -rf "$rootfs"
	# shellcheck disable=SC2086 # no mirror: debootstrap's default
	if ! debootstrap --variant=minbase bookworm "$rootfs" $mirror >"$WORK/debootstrap.log" 2>&1; then
		tail -n 20 "$WORK/debootstrap.log" >&2
		die "debootstrap failed (see $WORK/debootstrap.log)"
	fi
	rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
	tar -C "$rootfs" --numeric-owner -c . | "$DOCKER" import \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'CMD ["bash"]' - "$BASE" >/dev/null
	rm -rf "$rootfs"
	say "$BASE made in $((SECONDS - t0))s"
}

# standin NAME IMAGE CONTEXT: build IMAGE from CONTEXT (a copy of deploy/standins/NAME with its
# extra inputs), unless it was built from the same inputs.
standin() {
	local name="$1" image="$2" ctx="$3" hash t0=$SECONDS
	hash="$(cd "$ctx" && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)"
	if [ "$("$DOCKER" image inspect -f '{{index .Config.Labels "walletsaga.standin.inputs"}}' "$image" 2>/dev/null)" = "$hash" ]; then
		return 0
	fi
	say "building $image"
	if ! "$DOCKER" build -q --network host --build-arg BASE_IMAGE="$BASE" \
		--label walletsaga.standin.inputs="$hash" -t "$image" "$ctx" >"$WORK/$name.log" 2>&1; then
		tail -n 30 "$WORK/$name.log" >&2
		die "building $image failed (see $WORK/$name.log)"
	fi
	say "$image built in $((SECONDS - t0))s"
}

# context NAME: a fresh copy of deploy/standins/NAME to build from.
context() {
	rm -rf "${WORK:?}/ctx/$1"
	mkdir -p "$WORK/ctx"
	cp -r "$HERE/$1" "$WORK/ctx/$1"
	echo "$WORK/ctx/$1"
}

base

POSTGRES=walletsaga-standin/postgres:15
ROCKETMQ=walletsaga-standin/rocketmq:5.3.3
PROMETHEUS=walletsaga-standin/prometheus:2.42
GOLANG=walletsaga-standin/golang:$GO_VERSION
RUNTIME=walletsaga-standin/busybox:1.37

standin postgres "$POSTGRES" "$(context postgres)"
standin prometheus "$PROMETHEUS" "$(context prometheus)"
standin busybox "$RUNTIME" "$(context busybox)"

# RocketMQ: the jars scripts/services.sh resolves with Maven (kept in ~/.m2 and .run/rocketmq/lib).
lib="$("$ROOT/scripts/services.sh" jars)" || die "resolving the RocketMQ jars failed"
ctx="$(context rocketmq)"
cp -r "$lib" "$ctx/lib"
rm -f "$ctx/lib/.version"
standin rocketmq "$ROCKETMQ" "$ctx"

# Go: the toolchain the go command runs (GOTOOLCHAIN=go1.27.3), from the module cache.
toolchain="golang.org/toolchain@v0.0.1-go$GO_VERSION.linux-$(go env GOHOSTARCH)"
dir="$(go mod download -json "$toolchain" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[ -n "$dir" ] && [ -x "$dir/bin/go" ] || die "the module $toolchain has no bin/go"
ctx="$(context golang)"
cp -r "$dir" "$ctx/go"
chmod -R u+w "$ctx/go"
cp "${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}" "$ctx/ca-certificates.crt"
standin golang "$GOLANG" "$ctx"
rm -rf "$WORK/ctx"

cat <<EOF
export POSTGRES_IMAGE=$POSTGRES
export ROCKETMQ_IMAGE=$ROCKETMQ
export PROMETHEUS_IMAGE=$PROMETHEUS
export GO_IMAGE=$GOLANG
export RUNTIME_IMAGE=$RUNTIME
EOF

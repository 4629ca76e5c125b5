#!/usr/bin/env bash
# A Docker engine of the repository's own, for the compose test (scripts/compose-test.sh):
# Debian's docker.io (dockerd 20.10, overlay2) and Docker Compose built from its Go module,
# pinned, with every file of theirs under the git-ignored .run/docker. Nothing of the
# machine's own Docker (a daemon on /var/run/docker.sock, ~/.docker) is used or changed.
#
#   scripts/docker.sh install   install docker.io and debootstrap (apt-get) when missing, and
#                               build the compose CLI plugin (COMPOSE_VERSION) when missing;
#                               install-packages and plugin do one of the two
#   scripts/docker.sh start     start the engine (idempotent): its own containerd and dockerd,
#                               data root .run/docker/data, socket .run/docker/docker.sock
#   scripts/docker.sh stop      stop them (containers first)
#   scripts/docker.sh status    say whether it runs
#   scripts/docker.sh env       print the exports that point docker and docker compose at it:
#                               eval "$(scripts/docker.sh env)"
#   scripts/docker.sh clean     stop, then delete .run/docker (images, volumes, build cache)
#
# The engine runs without touching the host's network: no docker0 bridge, no iptables rules,
# no IP forwarding. Containers of one compose network reach each other; published ports are
# served on the host by docker-proxy; image builds that need the package registries use the
# host's network (docker build --network host).
set -Eeuo pipefail
export GOTOOLCHAIN=go1.27.3

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUN="${WALLETSAGA_RUN_DIR:-$ROOT/.run}"
DIR="$RUN/docker"
# Docker Compose v5, built from its module with the project's Go (the plugin is not among
# Debian's packages; Debian's docker-compose is the old Python 1.29).
COMPOSE_VERSION="${COMPOSE_VERSION:-v5.6.0}"
COMPOSE_MODULE=github.com/docker/compose/v5
DOCKER_CONFIG_DIR="$DIR/config"
PLUGIN="$DOCKER_CONFIG_DIR/cli-plugins/docker-compose"
SOCK="$DIR/docker.sock"
# The daemons' runtime state (their sockets among it) lives under /run: a Unix socket path
# has at most 107 bytes, which a checkout's path may not leave.
EXEC_ROOT="/run/walletsaga-docker-$(printf '%s' "$DIR" | md5sum | cut -c1-12)"
CONTAINERD_SOCK="$EXEC_ROOT/containerd.sock"
# Debian's client, not another docker on PATH: the plugin and the daemon are pinned with it.
DOCKER=/usr/bin/docker
START_TIMEOUT="${DOCKER_START_TIMEOUT:-60}"

say() { printf 'docker: %s\n' "$*" >&2; }
die() { printf 'docker: ERROR: %s\n' "$*" >&2; exit 1; }
pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
read_pid() { [ -f "$1" ] && cat "$1" || true; }

apt_install() { # package...: Debian's packages, their services not started
	command -v apt-get >/dev/null || die "$* missing and no apt-get: install $*"
	[ "$(id -u)" = 0 ] || die "$* missing: installing them needs root (apt-get)"
	export DEBIAN_FRONTEND=noninteractive
	# The packages ship services (containerd, docker) that their install would start. A
	# policy-rc.d that forbids every start (exit 101, honoured by deb-systemd-invoke and
	# invoke-rc.d) keeps them stopped; one already in place is left as it is.
	local policy=/usr/sbin/policy-rc.d own=0
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy"
		chmod 755 "$policy"
		own=1
	fi
	local rc=0
	apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "$@" >/dev/null || rc=$?
	[ "$own" = 1 ] && rm -f "$policy"
	[ "$rc" = 0 ] || die "apt-get install $* failed"
}

install_packages() {
	local missing=()
	[ -x /usr/sbin/dockerd ] && [ -x "$DOCKER" ] || missing+=(docker.io)
	command -v debootstrap >/dev/null || missing+=(debootstrap)
	if [ ${#missing[@]} -gt 0 ]; then
		say "installing ${missing[*]} from Debian's packages"
		# docker.io recommends neither of these but the engine needs them here: the archive
		# tools its image import uses, and the CA bundle its builds copy.
		apt_install "${missing[@]}" ca-certificates xz-utils
	fi
}

# plugin builds the compose CLI plugin into the engine's own config directory, once per version.
plugin() {
	if [ -x "$PLUGIN" ] && [ "$(cat "$DIR/compose.version" 2>/dev/null)" = "$COMPOSE_VERSION" ]; then
		return 0
	fi
	command -v go >/dev/null || die "go not found: it builds the compose plugin"
	say "building docker compose $COMPOSE_VERSION ($COMPOSE_MODULE) into $PLUGIN"
	local t0=$SECONDS tmp
	mkdir -p "$(dirname "$PLUGIN")"
	tmp="$(mktemp -d "$DIR/plugin.XXXXXX")"
	# The module's own source from the module proxy, built as the main module: its go.mod
	# (replace and exclude directives too) and go.sum decide every dependency, which
	# `go install module@version` would refuse. CGO off, like upstream's release build.
	local src
	if ! src="$(go mod download -json "$COMPOSE_MODULE@$COMPOSE_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')" || [ -z "$src" ]; then
		rm -rf "$tmp"
		die "downloading $COMPOSE_MODULE@$COMPOSE_VERSION failed"
	fi
	cp -r "$src" "$tmp/src"
	chmod -R u+w "$tmp/src"
	if ! (cd "$tmp/src" && CGO_ENABLED=0 go build -trimpath -o "$tmp/cmd" \
		-ldflags "-s -w -X $COMPOSE_MODULE/internal.Version=$COMPOSE_VERSION" ./cmd) >"$DIR/plugin.log" 2>&1; then
		tail -n 20 "$DIR/plugin.log" >&2
		rm -rf "$tmp"
		die "building docker compose $COMPOSE_VERSION failed (see $DIR/plugin.log)"
	fi
	mv "$tmp/cmd" "$PLUGIN"
	rm -rf "$tmp"
	echo "$COMPOSE_VERSION" >"$DIR/compose.version"
	say "docker compose $COMPOSE_VERSION built in $((SECONDS - t0))s"
}

env_lines() {
	printf 'export DOCKER_HOST=%q\n' "unix://$SOCK"
	printf 'export DOCKER_CONFIG=%q\n' "$DOCKER_CONFIG_DIR"
	# The classic client's builds go through BuildKit (cache mounts, --network host).
	printf 'export DOCKER_BUILDKIT=1\n'
	# Compose builds with the engine's own BuildKit, not with bake (no buildx plugin here).
	printf 'export COMPOSE_BAKE=false\n'
}

running() {
	pid_alive "$(read_pid "$DIR/dockerd.pid")" && [ -S "$SOCK" ] &&
		DOCKER_HOST="unix://$SOCK" DOCKER_CONFIG="$DOCKER_CONFIG_DIR" "$DOCKER" version >/dev/null 2>&1
}

show_tail() {
	if [ -f "$1" ]; then
		printf -- '---- last lines of %s ----\n' "$1" >&2
		tail -n 30 "$1" >&2
		printf -- '----\n' >&2
	fi
}

start() {
	[ "$(id -u)" = 0 ] || die "the engine runs as root (dockerd); run as root"
	[ -x /usr/sbin/dockerd ] || die "no dockerd: scripts/docker.sh install"
	if running; then
		say "dockerd already running (pid $(read_pid "$DIR/dockerd.pid"), $SOCK)"
		return 0
	fi
	stop_daemons
	mkdir -p "$DIR/data" "$DIR/containerd" "$EXEC_ROOT" "$DOCKER_CONFIG_DIR"
	# containerd of its own, so that no other engine's containerd (on its default socket) is
	# shared; the Kubernetes plugin off.
	cat >"$DIR/containerd.toml" <<-EOF
		version = 2
		root = "$DIR/containerd"
		state = "$EXEC_ROOT/containerd"
		disabled_plugins = ["io.containerd.grpc.v1.cri"]
		[grpc]
		  address = "$CONTAINERD_SOCK"
		[ttrpc]
		  address = "$CONTAINERD_SOCK.ttrpc"
	EOF
	local t0=$SECONDS i
	say "starting containerd and dockerd (data root $DIR/data)"
	nohup containerd --config "$DIR/containerd.toml" >"$DIR/containerd.log" 2>&1 </dev/null &
	echo $! >"$DIR/containerd.pid"
	for i in $(seq 1 $((START_TIMEOUT * 5))); do
		[ -S "$CONTAINERD_SOCK" ] && break
		pid_alive "$(read_pid "$DIR/containerd.pid")" || { show_tail "$DIR/containerd.log"; die "containerd exited"; }
		sleep 0.2
	done
	[ -S "$CONTAINERD_SOCK" ] || { show_tail "$DIR/containerd.log"; die "containerd did not start in ${START_TIMEOUT}s"; }
	# No docker0 (--bridge none), no iptables rules, no IP forwarding: compose's own networks
	# connect the containers, docker-proxy publishes their ports on the host.
	nohup dockerd \
		--data-root "$DIR/data" \
		--exec-root "$EXEC_ROOT/exec" \
		--pidfile "$DIR/dockerd.pid" \
		--host "unix://$SOCK" \
		--containerd "$CONTAINERD_SOCK" \
		--storage-driver overlay2 \
		--bridge none --iptables=false --ip6tables=false --ip-forward=false --ip-masq=false \
		--userland-proxy=true \
		>"$DIR/dockerd.log" 2>&1 </dev/null &
	local pid=$!
	for i in $(seq 1 $((START_TIMEOUT * 5))); do
		running && break
		pid_alive "$pid" || { show_tail "$DIR/dockerd.log"; die "dockerd exited"; }
		sleep 0.2
	done
	running || { show_tail "$DIR/dockerd.log"; die "dockerd did not answer in ${START_TIMEOUT}s"; }
	say "dockerd up in $((SECONDS - t0))s ($("$DOCKER" --host "unix://$SOCK" version --format 'engine {{.Server.Version}}' 2>/dev/null))"
}

stop_pid() {
	local name="$1" pidfile="$2" pid i
	pid="$(read_pid "$pidfile")"
	if pid_alive "$pid"; then
		say "stopping $name (pid $pid)"
		kill -TERM "$pid" 2>/dev/null || true
		for i in $(seq 1 150); do
			pid_alive "$pid" || break
			sleep 0.2
		done
		if pid_alive "$pid"; then
			say "$name did not stop in 30s: SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	rm -f "$pidfile"
}

stop_daemons() {
	if running; then
		local ids
		ids="$(DOCKER_HOST="unix://$SOCK" "$DOCKER" ps -q 2>/dev/null || true)"
		if [ -n "$ids" ]; then
			say "stopping $(wc -w <<<"$ids") running container(s)"
			# shellcheck disable=SC2086 # container ids, one word each
			DOCKER_HOST="unix://$SOCK" "$DOCKER" stop -t 10 $ids >/dev/null 2>&1 || true
		fi
	fi
	stop_pid dockerd "$DIR/dockerd.pid"
	stop_pid containerd "$DIR/containerd.pid"
	# A killed dockerd leaves its mounts (overlay layers, the netns of containers) behind.
	local m
	for m in $(awk -v a="$DIR/data/" -v b="$EXEC_ROOT/" 'index($2, a) == 1 || index($2, b) == 1 { print $2 }' /proc/mounts | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done
	rm -f "$SOCK"
}

status() {
	if running; then
		say "running  pid=$(read_pid "$DIR/dockerd.pid")  DOCKER_HOST=unix://$SOCK  data=$DIR/data"
	else
		say "stopped  ($SOCK)"
	fi
}

cmd="${1:-status}"
mkdir -p "$DIR"
case "$cmd" in
install)
	install_packages
	plugin
	;;
install-packages) install_packages ;;
plugin) plugin ;;
start) start ;;
stop) stop_daemons ;;
status) status ;;
env) env_lines ;;
clean)
	stop_daemons
	say "deleting $DIR (images, volumes, build cache; the compose plugin too)"
	rm -rf "$DIR" "$EXEC_ROOT"
	;;
*) die "unknown command $cmd (install|start|stop|status|env|clean)" ;;
esac

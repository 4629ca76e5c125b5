#!/usr/bin/env bash
# The compose test (make test runs it, so CI does): docker-compose.yml, run for real on a
# Docker engine of the repository's own (scripts/docker.sh), end to end.
#
#   1. install Debian's docker.io and the pinned compose plugin when missing; start dockerd
#   2. build the images: upstream's cannot be pulled here, so local stand-ins
#      (deploy/standins/build.sh), and walletsaga:dev from ./Dockerfile with BuildKit
#   3. docker compose up -d --wait, every service of the default profiles (Grafana, in the
#      profile grafana, has no stand-in and is left out)
#   4. the binaries' --version and the image's labels name this commit; the topics job runs
#      again and sets the users' secrets again
#   5. the demo's story from the host, against the published ports (bin/demo, as make demo
#      checks it: A's 22 SMS in order, B's dead letter and the next SMS, the refund)
#   6. docker compose run --rm demo: the same story from the stack's own demo, whose links
#      open on the host and which prints a deposit's trace from the stack's trace receiver
#   7. under traffic (the story, played again and again), the notifier scaled to 2 and back
#      to 1: every SMS the stack sent was sent once, in order, and each story's SMS logs are
#      as expected
#   8. docker compose down -v, and the engine stopped, whatever happened
#
# It fails, never skips, when something cannot be had (Docker, a package, an image).
# Everything lives under .run/: the engine's data root keeps the images, the module and build
# caches across runs (a second run builds nothing that did not change); the logs of a run
# are in .run/compose-test/. COMPOSE_TEST_PORT_BASE (default 28000) moves the published host
# ports, which must be free: 28080 walletsvc, 28081-28089 notifier, 28090 providersim, and
# Postgres, the name server, the broker, traces and Prometheus above them.
set -Eeuo pipefail
export GOTOOLCHAIN=go1.27.3
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RUN="${WALLETSAGA_RUN_DIR:-$ROOT/.run}"
OUT="$RUN/compose-test"
DOCKER=/usr/bin/docker
T0=$SECONDS
say() { printf 'compose-test: [%3ds] %s\n' "$((SECONDS - T0))" "$*"; }
die() { printf 'compose-test: [%3ds] FAIL: %s\n' "$((SECONDS - T0))" "$*" >&2; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT"

base="${COMPOSE_TEST_PORT_BASE:-28000}"
export WALLETSVC_PORT=$((base + 80)) NOTIFIER_PORT=$((base + 81)) NOTIFIER_PORT_LAST=$((base + 89))
export PROVIDERSIM_PORT=$((base + 90)) POSTGRES_PORT=$((base + 432)) NAMESRV_PORT=$((base + 876))
export BROKER_PORT=$((base + 911)) TRACES_PORT=$((base + 318)) PROMETHEUS_PORT=$((base + 909))

# 1. The engine. The plugin builds (CPU) while the images build (mostly downloads).
scripts/docker.sh install-packages
scripts/docker.sh plugin >"$OUT/plugin.log" 2>&1 &
plugin_pid=$!
scripts/docker.sh start
eval "$(scripts/docker.sh env)"
# What a run before this one left in the engine (it is the repository's own): gone.
leftovers="$("$DOCKER" ps -aq)"
if [ -n "$leftovers" ]; then
	say "removing $(wc -l <<<"$leftovers") container(s) a run before left"
	# shellcheck disable=SC2086 # container ids
	"$DOCKER" rm -f -v $leftovers >/dev/null
fi
"$DOCKER" volume prune -f >/dev/null
for p in $(seq "$WALLETSVC_PORT" "$PROVIDERSIM_PORT") "$POSTGRES_PORT" "$NAMESRV_PORT" "$BROKER_PORT" "$TRACES_PORT" "$PROMETHEUS_PORT"; do
	[ -z "$(ss -Hltn "sport = :$p" 2>/dev/null)" ] || die "port $p is taken: free it, or set COMPOSE_TEST_PORT_BASE"
done

compose() { "$DOCKER" compose "$@"; }
finish() {
	local rc=$?
	set +e
	if [ -n "${plugin_pid:-}" ]; then wait "$plugin_pid" 2>/dev/null; fi
	if [ -x "$DOCKER_CONFIG/cli-plugins/docker-compose" ] && "$DOCKER" version >/dev/null 2>&1; then
		compose ps -a >"$OUT/ps.txt" 2>&1
		compose logs --no-color --timestamps >"$OUT/stack.log" 2>&1
		if [ "$rc" != 0 ]; then
			cat "$OUT/ps.txt" >&2
			echo "---- the stack's last log lines (all in $OUT/stack.log) ----" >&2
			tail -n 40 "$OUT/stack.log" >&2
		fi
		say "docker compose down -v"
		compose --profile demo down -v --remove-orphans >"$OUT/down.log" 2>&1 || { cat "$OUT/down.log" >&2; rc=1; }
	fi
	jobs -p | xargs -r kill 2>/dev/null
	scripts/docker.sh stop
	if [ "$rc" = 0 ]; then
		say "PASS in $((SECONDS - T0))s (logs in $OUT)"
	else
		say "FAILED after $((SECONDS - T0))s (logs in $OUT)"
	fi
	exit "$rc"
}
trap finish EXIT

# 2. Images.
eval "$(deploy/standins/build.sh)"
export WALLETSAGA_REVISION WALLETSAGA_VERSION
WALLETSAGA_REVISION="$(git rev-parse HEAD)"
WALLETSAGA_VERSION="$(git describe --tags --match 'v*' --always --dirty)"
say "building walletsaga:dev ($WALLETSAGA_VERSION) from ./Dockerfile"
# docker build, not compose build: Compose builds with BuildKit (the Dockerfile's cache
# mounts) only through the buildx plugin, which Debian's docker.io lacks; it would fall back
# to the classic builder. The image is the one the compose file names, so `up` builds nothing.
t=$SECONDS
"$DOCKER" build -q --network host --build-arg GO_IMAGE --build-arg RUNTIME_IMAGE \
	--build-arg WALLETSAGA_VERSION --build-arg WALLETSAGA_REVISION -t walletsaga:dev . >"$OUT/build.log" 2>&1 ||
	{ tail -n 40 "$OUT/build.log" >&2; die "building walletsaga:dev failed"; }
say "walletsaga:dev built in $((SECONDS - t))s"
go build -o "$OUT/demo" ./cmd/demo
wait "$plugin_pid" || { cat "$OUT/plugin.log" >&2; die "building the compose plugin failed"; }
plugin_pid=
compose version

# 3. Up.
say "docker compose up -d --wait (Grafana left out: no stand-in, profile grafana)"
t=$SECONDS
compose up -d --wait --wait-timeout 300 >"$OUT/up.log" 2>&1 || { cat "$OUT/up.log" >&2; die "docker compose up -d --wait failed"; }
say "the stack is up and healthy in $((SECONDS - t))s"
compose ps --format '{{.Service}} {{.State}} {{.Health}}' | sort | sed 's/^/  /'

# 4. Versions, labels, the topics job again.
v="$("$DOCKER" run --rm --entrypoint /walletsvc walletsaga:dev --version)"
say "$v"
grep -q "revision $WALLETSAGA_REVISION" <<<"$v" || die "walletsvc --version does not name revision $WALLETSAGA_REVISION"
label="$("$DOCKER" image inspect -f '{{index .Config.Labels "org.opencontainers.image.revision"}}' walletsaga:dev)"
[ "$label" = "$WALLETSAGA_REVISION" ] || die "the image's org.opencontainers.image.revision is $label, not $WALLETSAGA_REVISION"
say "the topics job again, on a broker that has its users (beside the stories)"
compose run --rm --no-deps topics >"$OUT/topics-again.log" 2>&1 &
topics_pid=$!

# 5. The story from the host.
host_demo() { # name: play the story against the published ports
	WALLETSVC_URL="http://127.0.0.1:$WALLETSVC_PORT" NOTIFIER_URL="http://127.0.0.1:$NOTIFIER_PORT" \
		DEMO_TRACES_URL="http://127.0.0.1:$TRACES_PORT" READ_TOKEN=walletsaga-demo-read-token \
		OPERATOR_TOKEN=walletsaga-dev-operator-token DEMO_EXIT=1 "$OUT/demo" >"$OUT/$1.log" 2>&1
}
say "the story, from the host"
host_demo story-host || { cat "$OUT/story-host.log" >&2; die "the story from the host is not as expected"; }
sed -n '/^SMS log of/,/^$/p' "$OUT/story-host.log" | sed 's/^/  /'
grep '^OK:' "$OUT/story-host.log"

# 6. The stack's own demo.
say "docker compose run --rm demo"
compose run --rm demo >"$OUT/story-compose.log" 2>&1 || { cat "$OUT/story-compose.log" >&2; die "docker compose run --rm demo failed"; }
for want in "http://127.0.0.1:$NOTIFIER_PORT/#token=walletsaga-demo-read-token" \
	"http://127.0.0.1:$WALLETSVC_PORT/#token=walletsaga-dev-operator-token" "sms.send [notifier]" "OK: A got 22 SMS in order"; do
	grep -qF -- "$want" "$OUT/story-compose.log" || { cat "$OUT/story-compose.log" >&2; die "the compose demo's output has no $want"; }
done
! sed -n '/^Open the live SMS page/,$p' "$OUT/story-compose.log" | grep -Eq 'http://(walletsvc|notifier|traces):' ||
	{ cat "$OUT/story-compose.log" >&2; die "the compose demo prints links to container host names"; }
sed -n '/^The trace of/,/^OK:/p' "$OUT/story-compose.log" | sed 's/^/  /'

wait "$topics_pid" || { cat "$OUT/topics-again.log" >&2; die "the topics job failed the second time"; }
grep -q "user walletsvc: secret set again" "$OUT/topics-again.log" || { cat "$OUT/topics-again.log" >&2; die "the topics job did not set walletsvc's secret again"; }
say "the topics job ran again: $(grep -c 'secret set again' "$OUT/topics-again.log") users' secrets set again"

# 7. Scale the notifier to 2 and back, under traffic.
say "traffic: the story again and again, two at a time; the notifier scaled to 2 and back"
stop_traffic="$OUT/stop-traffic"
traffic() { # lane
	local i=0
	while [ ! -e "$stop_traffic" ]; do
		i=$((i + 1))
		host_demo "traffic-$1-$i" || { echo "traffic-$1-$i" >>"$OUT/traffic-failed"; return 1; }
	done
	echo "$i" >"$OUT/traffic-$1.runs"
}
traffic a &
ta=$!
traffic b &
tb=$!
sleep 5
compose up -d --wait --wait-timeout 120 --no-recreate --scale notifier=2 notifier >"$OUT/scale-up.log" 2>&1 ||
	{ cat "$OUT/scale-up.log" >&2; die "scaling the notifier to 2 failed"; }
compose ps notifier --format '{{.Name}} {{.State}} {{.Health}} {{.Ports}}' | sed 's/^/  /'
[ "$(compose ps -q notifier | wc -l)" = 2 ] || die "not 2 notifiers"
# Both replicas' output, followed until the one scaled away is removed.
mapfile -t replicas < <(compose ps notifier --format '{{.Name}}' | sort)
declare -A follower
for r in "${replicas[@]}"; do
	"$DOCKER" logs -f --timestamps "$r" >"$OUT/$r.log" 2>&1 &
	follower[$r]=$!
done
sleep 25
compose up -d --wait --wait-timeout 120 --no-recreate --scale notifier=1 notifier >"$OUT/scale-down.log" 2>&1 ||
	{ cat "$OUT/scale-down.log" >&2; die "scaling the notifier back to 1 failed"; }
kept="$(compose ps notifier --format '{{.Name}}')"
sleep 10
touch "$stop_traffic"
wait "$ta" || true
wait "$tb" || true
[ ! -e "$OUT/traffic-failed" ] || { cat "$OUT/$(head -n 1 "$OUT/traffic-failed").log" >&2; die "a story under scaling is not as expected: $(tr '\n' ' ' <"$OUT/traffic-failed")"; }
runs=$(($(cat "$OUT/traffic-a.runs") + $(cat "$OUT/traffic-b.runs")))
for r in "${replicas[@]}"; do
	if [ "$r" = "$kept" ]; then
		kill "${follower[$r]}" 2>/dev/null || true
		"$DOCKER" logs --timestamps "$r" >"$OUT/$r.log" 2>&1
	else
		wait "${follower[$r]}" || true
		removed="$r"
	fi
done
[ -n "${removed:-}" ] || die "no notifier was scaled away"
# Every SMS sent (the log sender's line "SMS user=U seq=S ...") by either replica: each
# (user, seq) once, each user's in increasing seq order by the time they were written
# (docker's timestamps, their fraction padded to 9 digits to sort as text).
for r in "${replicas[@]}"; do cat "$OUT/$r.log"; done |
	sed -n 's/^\([^ ]*\) SMS user=\([0-9]*\) seq=\([0-9]*\) .*/\1 \2 \3/p' |
	awk '{ split($1, t, /[.Z]/); f = substr(t[2] "000000000", 1, 9); print t[1] "." f, $2, $3 }' | sort >"$OUT/sent.txt"
by2="$(awk '{ print $2 }' "$OUT/sent.txt" | sort -u | wc -l)"
sent2="$(wc -l <"$OUT/sent.txt")"
on2="$(grep -c ' SMS user=' "$OUT/$removed.log" || true)"
awk '
	seen[$2 " " $3]++ { printf "user %s seq %s sent twice\n", $2, $3; bad = 1 }
	($2 in last) && $3 <= last[$2] { printf "user %s: seq %s sent after seq %s\n", $2, $3, last[$2]; bad = 1 }
	{ last[$2] = $3 }
	END { exit bad }' "$OUT/sent.txt" >"$OUT/order-problems.txt" ||
	{ head -n 20 "$OUT/order-problems.txt" >&2; die "SMS sent twice or out of order (all in $OUT/order-problems.txt)"; }
[ "$on2" -gt 0 ] || die "$removed sent no SMS while it ran"
say "under scaling: $runs stories as expected; $sent2 SMS to $by2 users, each once and in order ($on2 by $removed, scaled away)"
say "stack test done in $((SECONDS - T0))s"

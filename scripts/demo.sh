#!/usr/bin/env bash
# make demo: start what is missing (Postgres, RocketMQ, the provider simulator, both services), play the ordered-SMS
# story through the REST API, and print each user's SMS log. The stack keeps running until
# Ctrl-C; with DEMO_EXIT=1 the script exits when the story is told (status 0 only if the SMS
# logs are as expected).
set -Eeuo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RUN="$ROOT/.run/demo"
mkdir -p "$RUN" bin
WALLETSVC_ADDR="${WALLETSVC_ADDR:-127.0.0.1:8080}"
NOTIFIER_ADDR="${NOTIFIER_ADDR:-127.0.0.1:8081}"
# The demo runs the services in dev mode, explicitly: production (the default when
# WALLETSAGA_ENV is unset) refuses the dev stack's Postgres settings, the demo's tokens, the
# log sender and the failure switches.
export WALLETSAGA_ENV=dev
# The Go the project builds with, as the Makefile pins it (fetched through the module proxy once).
export GOTOOLCHAIN=go1.27.3
# The payment gateway and the merchant: the provider simulator (bin/providersim, dev only),
# which walletsvc reaches over HTTP with the simulator's documented dev token.
PROVIDER_ADDR="${PROVIDER_ADDR:-127.0.0.1:8082}"
# Traces: unless OTEL_EXPORTER_OTLP_ENDPOINT points the services at a collector of yours, the
# demo runs a small OTLP/HTTP receiver of its own (bin/demo otlp-sink), points both services
# at it, and prints one deposit's trace, from its HTTP request to its SMS, as a span tree.
DEMO_OTLP_ADDR="${DEMO_OTLP_ADDR:-127.0.0.1:8083}"
own_sink=0
if [ -z "${OTEL_EXPORTER_OTLP_ENDPOINT:-}" ] && [ -z "${OTEL_EXPORTER_OTLP_TRACES_ENDPOINT:-}" ]; then
	own_sink=1
	export OTEL_EXPORTER_OTLP_ENDPOINT="http://$DEMO_OTLP_ADDR" OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf
	export DEMO_TRACES_URL="http://$DEMO_OTLP_ADDR"
fi
# Spans leave each service within 200 ms rather than the SDK's default 5 s.
export OTEL_BSP_SCHEDULE_DELAY="${OTEL_BSP_SCHEDULE_DELAY:-200}"
# walletsvc's user-facing API needs a service token; the demo uses the documented dev default
# unless SERVICE_TOKEN is set (walletsvc and bin/demo both read it from the environment).
export SERVICE_TOKEN="${SERVICE_TOKEN:-walletsaga-dev-service-token}"
# The notifier's read API and page need a read token (none by default): the demo gives the
# notifier one and reads with it, unless READ_TOKEN is set.
export READ_TOKEN="${READ_TOKEN:-walletsaga-demo-read-token}"
# The consoles' operator actions (retry, resolve, replay, skip) need an operator: unless
# OPERATOR_TOKENS is set, both services get the compose stack's one dev operator (the SHA-256
# of its documented token) and the demo prints the consoles' links with its token.
if [ -z "${OPERATOR_TOKENS:-}" ]; then
	export OPERATOR_TOKEN=walletsaga-dev-operator-token
	export OPERATOR_TOKENS="dev-operator:sha256:$(printf %s "$OPERATOR_TOKEN" | sha256sum | cut -d' ' -f1)"
fi
say() { printf 'demo: %s\n' "$*"; }

# The stack's own messages go to a log; the demo shows the few that matter, and stops at once
# when the stack did not come up.
if ! scripts/services.sh up >"$RUN/services.log" 2>&1; then
	grep -E 'ERROR' "$RUN/services.log" >&2 || true
	tail -n 20 "$RUN/services.log" >&2
	say "ERROR: the stack did not start (the whole output: $RUN/services.log)"
	exit 1
fi
grep -E 'up in|already running|resolving|jars resolved|cannot reach' "$RUN/services.log" || true
say "building bin/walletsvc, bin/notifier, bin/providersim, bin/demo"
go build -o bin/walletsvc ./cmd/walletsvc
go build -o bin/notifier ./cmd/notifier
go build -o bin/providersim ./cmd/providersim
go build -o bin/demo ./cmd/demo

addrs=("$WALLETSVC_ADDR" "$NOTIFIER_ADDR" "$PROVIDER_ADDR")
[ "$own_sink" = 1 ] && addrs+=("$DEMO_OTLP_ADDR")
for addr in "${addrs[@]}"; do
	if [ -n "$(ss -Hltn "sport = :${addr##*:}" 2>/dev/null)" ]; then
		echo "demo: ERROR: port ${addr##*:} is taken (is another demo running? stop it, or set WALLETSVC_ADDR / NOTIFIER_ADDR / PROVIDER_ADDR / DEMO_OTLP_ADDR)" >&2
		exit 1
	fi
done

pids=()
stop() {
	local p
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap stop EXIT
trap 'echo; say "stopping walletsvc, notifier and providersim (Postgres and RocketMQ keep running: make services-down)"; exit 0' INT TERM

if [ "$own_sink" = 1 ]; then
	HTTP_ADDR="$DEMO_OTLP_ADDR" bin/demo otlp-sink >"$RUN/otlp-sink.log" 2>&1 &
	pids+=($!)
fi
WALLETSAGA_ENV=dev HTTP_ADDR="$PROVIDER_ADDR" LOG_LEVEL=warn bin/providersim serve >"$RUN/providersim.log" 2>&1 &
pids+=($!)
HTTP_ADDR="$WALLETSVC_ADDR" LOG_LEVEL=warn PAYMENT_GATEWAY_URL="http://$PROVIDER_ADDR" MERCHANT_URL="http://$PROVIDER_ADDR" \
	bin/walletsvc serve >"$RUN/walletsvc.log" 2>&1 &
pids+=($!)
# The story's failing SMS (Bob's 4.04) is retried 3 times then dead-lettered within a second,
# so the demo can show the next one going out: demo settings, not the production policy
# (8 attempts over at least 15 minutes). The failure switches (off unless configured) are the
# story's: Bob's 4.04 and phones ending 0000 always fail.
HTTP_ADDR="$NOTIFIER_ADDR" LOG_LEVEL=warn SMS_MAX_ATTEMPTS=3 SMS_RETRY_BASE=200ms SMS_DEAD_LETTER_AFTER=0s \
	SMS_FAIL_PHONE_PATTERN='0000$' SMS_FAIL_AMOUNT=404 bin/notifier run >"$RUN/notifier.log" 2>&1 &
pids+=($!)
for probe in "$PROVIDER_ADDR/healthz" "$WALLETSVC_ADDR/readyz" "$NOTIFIER_ADDR/readyz"; do
	for _ in $(seq 1 300); do
		curl -fsS "http://$probe" >/dev/null 2>&1 && break
		for p in "${pids[@]}"; do
			kill -0 "$p" 2>/dev/null || { echo "demo: ERROR: a service exited; see $RUN/*.log" >&2; tail -n 20 "$RUN"/*.log >&2; exit 1; }
		done
		sleep 0.2
	done
	curl -fsS "http://$probe" >/dev/null || { echo "demo: ERROR: http://$probe not ready; see $RUN/*.log" >&2; exit 1; }
done
say "walletsvc on http://$WALLETSVC_ADDR, notifier on http://$NOTIFIER_ADDR, payment gateway and merchant simulator on http://$PROVIDER_ADDR (logs in $RUN/)"
say "try an outage: bin/providersim outage --providersim-url http://$PROVIDER_ADDR gateway fail 60s"
echo

status=0
WALLETSVC_URL="http://$WALLETSVC_ADDR" NOTIFIER_URL="http://$NOTIFIER_ADDR" bin/demo || status=$?
if [ "${DEMO_EXIT:-0}" = 1 ]; then
	exit "$status"
fi
say "the stack keeps running; press Ctrl-C to stop walletsvc, notifier and providersim"
while :; do sleep 3600 & wait $! || true; done

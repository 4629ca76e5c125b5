#!/usr/bin/env bash
# Starts, stops and reports the dev/test stack on loopback: a throwaway PostgreSQL cluster and
# a real Apache RocketMQ name server + broker, all state under the git-ignored .run/.
#
#   scripts/services.sh up       start what is not running (idempotent), create topics
#   scripts/services.sh down     stop the broker, then the name server, then Postgres
#   scripts/services.sh status   say what runs where
#   scripts/services.sh clean    down, then delete .run/ state (jars are kept)
#   scripts/services.sh notifier-user USER SECRET TOPIC GROUP   a RocketMQ user with the rights
#                                the notifier's user has, on TOPIC and GROUP (for tests)
#   scripts/services.sh jars     resolve the RocketMQ jars (Maven) if needed; print their directory
#   scripts/services.sh topic T N [BROKER]   create topic T with N read/write queues on every
#                                broker of the cluster, or on BROKER only (checked)
#   scripts/services.sh restart-broker [BROKER]  SIGTERM a broker and start it again (same store)
#   scripts/services.sh kill-broker BROKER       SIGKILL a broker (it stays down)
#   scripts/services.sh start-broker BROKER      start one broker (a stopped one, or one joining)
#   scripts/services.sh freeze-broker BROKER     SIGSTOP a broker: it hangs, its ports stay open
#   scripts/services.sh thaw-broker BROKER       SIGCONT a frozen broker
#   scripts/services.sh reset-offsets GROUP TOPIC TIME  move consumer group GROUP back on TOPIC to the
#                                first message each queue stored at or after TIME (Unix ms), with
#                                mqadmin resetOffsetByTime: docs/OPERATIONS.md's step after a
#                                restore of the notifier's database (checked)
#   scripts/services.sh restart-pg [immediate]   restart Postgres, the primary (fast: sessions
#                                are cut; immediate: no shutdown checkpoint, as after a crash)
#   scripts/services.sh pg-standby   give the cluster a synchronous streaming standby at
#                                PG_STANDBY_PORT (idempotent); after a failover, rebuild the
#                                old primary as the new one's standby (pg_basebackup afresh)
#   scripts/services.sh pg-failover  fail over to the synchronous standby: stop the primary as
#                                after a crash, fence it, promote the standby (pg_ctl promote)
#
# A cluster with a standby has two nodes, either of which may be the primary: the first, at
# PG_PORT in .run/pg/data (what up makes), and the second, at PG_STANDBY_PORT (PG_PORT + 2) in
# .run/pg/data-b. Clients reach whichever is the primary through both hosts with
# target_session_attrs=read-write (status prints the URL).
#
# BROKERS=N starts a cluster of N brokers (broker-a, broker-b, …), each a master with its own
# store and ports (BROKER_PORT, then +20 each), under one name server; topics get their
# queues on every broker. The default is one broker.
#
# Every broker runs with access control (RocketMQ ACL 2.0: every request signed, each user
# allowed only its own topics and groups) unless RMQ_ACL=off. Its users, created at start
# (idempotently, on each broker), with DEV secrets that are documented and must be replaced
# anywhere else:
#   RMQ_ADMIN_USER / RMQ_ADMIN_SECRET        super user: mqadmin (through
#                                            $RMQ_DIR/home/conf/tools.yml), tests, bench, chaos
#   RMQ_WALLET_USER / RMQ_WALLET_SECRET      walletsvc: publish to RMQ_EVENTS_TOPIC, nothing else
#   RMQ_NOTIFIER_USER / RMQ_NOTIFIER_SECRET  notifier: consume RMQ_EVENTS_TOPIC as group
#                                            RMQ_NOTIFIER_GROUP, publish to and read its DLQ
# The name server checks no signature (RocketMQ 5.3 has no access control there): see the
# trust boundaries of docs/ARCHITECTURE.md.
#
# Every knob is an environment variable with a default that matches the rest of the repo.
set -Eeuo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUN="${WALLETSAGA_RUN_DIR:-$ROOT/.run}"

PG_PORT="${PG_PORT:-55432}"
PG_DB="${PG_DB:-walletsaga}"
PG_USER="${PG_USER:-walletsaga}"
PG_PASSWORD="${PG_PASSWORD:-walletsaga}"
PG_SYNCHRONOUS_COMMIT="${PG_SYNCHRONOUS_COMMIT:-off}"
PG_STANDBY_PORT="${PG_STANDBY_PORT:-$((PG_PORT + 2))}"
PG_DATA="$RUN/pg/data"
PG_LOG="$RUN/pg/postgres.log"
# A cluster kept outside the run dir (see pg_prepare_dir) is reached by its real path: the
# postgres user cannot follow a link through a directory it cannot traverse.
if [ -L "$PG_DATA" ]; then
	PG_DATA="$(readlink "$PG_DATA")"
	PG_LOG="$(dirname "$PG_DATA")/postgres.log"
fi

RMQ_VERSION="${RMQ_VERSION:-5.3.3}"
RMQ_DIR="$RUN/rocketmq"
# The jars may be shared between run directories (make chaos runs a second stack).
RMQ_LIB="${RMQ_LIB:-$RMQ_DIR/lib}"
NAMESRV_PORT="${NAMESRV_PORT:-9876}"
BROKER_PORT="${BROKER_PORT:-10911}"
BROKERS="${BROKERS:-1}"
NAMESRV_ADDR="127.0.0.1:$NAMESRV_PORT"
CLUSTER="DefaultCluster"
# Topics the product uses, "name:queues" separated by spaces. The notifier group's retry and
# dead-letter topics are created up front: the broker would create them on first use, and
# until then the client logs a route warning every few seconds.
TOPICS="${TOPICS:-wallet-events:8 %RETRY%wallet-notifier:1 %DLQ%wallet-notifier:1}"
START_TIMEOUT="${START_TIMEOUT:-90}"

RMQ_ACL="${RMQ_ACL:-on}"
RMQ_ADMIN_USER="${RMQ_ADMIN_USER:-walletsaga-admin}"
RMQ_ADMIN_SECRET="${RMQ_ADMIN_SECRET:-walletsaga-dev-admin-secret}"
RMQ_WALLET_USER="${RMQ_WALLET_USER:-walletsvc}"
RMQ_WALLET_SECRET="${RMQ_WALLET_SECRET:-walletsaga-dev-walletsvc-secret}"
RMQ_NOTIFIER_USER="${RMQ_NOTIFIER_USER:-notifier}"
RMQ_NOTIFIER_SECRET="${RMQ_NOTIFIER_SECRET:-walletsaga-dev-notifier-secret}"
RMQ_EVENTS_TOPIC="${RMQ_EVENTS_TOPIC:-wallet-events}"
RMQ_NOTIFIER_GROUP="${RMQ_NOTIFIER_GROUP:-wallet-notifier}"

say() { printf 'services: %s\n' "$*"; }
die() { printf 'services: ERROR: %s\n' "$*" >&2; exit 1; }

# port_pid PORT prints the pid listening on 127.0.0.1:PORT (or on any address), if any.
port_pid() {
	ss -Hltnp "sport = :$1" 2>/dev/null | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -n1
}
port_busy() { [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]; }

# wait_port_free PORT waits (up to 30 s) while a connection, not a listener, holds PORT as
# its local port: the dev ports lie inside Linux's ephemeral range (32768-60999), from which
# the kernel picks the local ports of outgoing connections, and a server cannot listen on a
# port such a connection holds ("Address already in use"). One did, once, when make chaos
# started its Postgres on 55442 right after another stack stopped.
wait_port_free() {
	local i held
	for i in $(seq 1 60); do
		held=$(ss -Htn state connected exclude time-wait "sport = :$1" 2>/dev/null)
		[ -z "$held" ] && return 0
		[ "$i" = 1 ] && say "port $1 is the local port of a connection; waiting for it to close: $held"
		sleep 0.5
	done
	die "port $1 is still the local port of a connection after 30 s: $held"
}

pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
read_pid() { [ -f "$1" ] && cat "$1" || true; }

show_tail() {
	local f="$1"
	if [ -f "$f" ]; then
		printf -- '---- last lines of %s ----\n' "$f" >&2
		tail -n 40 "$f" >&2
		printf -- '----\n' >&2
	fi
}

# ---------------------------------------------------------------- PostgreSQL

pg_bindir() {
	local d
	for d in /usr/lib/postgresql/*/bin; do
		[ -x "$d/initdb" ] && { echo "$d"; return 0; }
	done
	if command -v initdb >/dev/null 2>&1; then dirname "$(readlink -f "$(command -v initdb)")"; return 0; fi
	return 1
}

pg_install() {
	say "no initdb found: installing PostgreSQL from Debian's packages (apt-get)"
	command -v apt-get >/dev/null || die "no initdb and no apt-get: install PostgreSQL 15+ server binaries"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq || die "apt-get update failed"
	apt-get install -y -qq postgresql >/dev/null || die "apt-get install postgresql failed"
}

# As root, initdb and postgres refuse to run: everything runs as the 'postgres' OS user.
pg_as() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

pg_prepare_dir() {
	mkdir -p "$RUN/pg"
	if [ "$(id -u)" = 0 ]; then
		id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
		# The postgres user must be able to reach the data dir. When the checkout lives under a
		# directory it cannot traverse, keep the cluster in /tmp and link it from .run/pg.
		if ! runuser -u postgres -- test -x "$RUN/pg" 2>/dev/null; then
			local alt
			alt="/tmp/walletsaga-pg-$(printf '%s' "$RUN" | md5sum | cut -c1-12)"
			say "postgres user cannot reach $RUN/pg; keeping the cluster in $alt"
			mkdir -p "$alt/data"
			chown postgres: "$alt" "$alt/data"
			# Links for people and tools reading .run/pg; the scripts use the real paths.
			[ -L "$RUN/pg/data" ] || { rm -rf "$RUN/pg/data"; ln -s "$alt/data" "$RUN/pg/data"; }
			[ -L "$RUN/pg/postgres.log" ] || { rm -f "$RUN/pg/postgres.log"; ln -s "$alt/postgres.log" "$RUN/pg/postgres.log"; }
			PG_DATA="$alt/data" PG_LOG="$alt/postgres.log"
		fi
		chown postgres: "$RUN/pg"
	fi
}

pg_running() { pg_as "$PG_BIN/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1; }

# pg_stat_statements counts every statement's calls and time; make bench reads it per phase
# (where the database time goes), and it can only be loaded at the server's start. A cluster
# made before this setting gets it appended here: a stopped one loads it when it starts below,
# a running one at its next restart (scripts/services.sh restart-pg), until when make bench
# refuses to run and says so.
PG_PRELOAD="shared_preload_libraries = 'pg_stat_statements'"
pg_preload() {
	grep -qxF "$PG_PRELOAD" "$PG_DATA/postgresql.conf" || printf '%s\n' "$PG_PRELOAD" >>"$PG_DATA/postgresql.conf"
}

pg_up() {
	PG_BIN="$(pg_bindir)" || { pg_install; PG_BIN="$(pg_bindir)" || die "PostgreSQL installed but initdb still not found"; }
	pg_prepare_dir
	if [ -f "$PG_DATA/PG_VERSION" ] && pg_running; then
		say "postgres already running on 127.0.0.1:$PG_PORT ($PG_DATA)"
		pg_preload
	else
		if port_busy "$PG_PORT"; then
			die "port $PG_PORT is taken (pid $(port_pid "$PG_PORT")) but not by this repo's cluster; stop it or set PG_PORT"
		fi
		if [ ! -f "$PG_DATA/PG_VERSION" ]; then
			say "initdb $PG_DATA ($("$PG_BIN/postgres" --version))"
			mkdir -p "$PG_DATA"
			[ "$(id -u)" = 0 ] && chown postgres: "$PG_DATA"
			chmod 700 "$PG_DATA"
			pg_as "$PG_BIN/initdb" -D "$PG_DATA" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >"$RUN/pg/initdb.log" 2>&1 ||
				{ show_tail "$RUN/pg/initdb.log"; die "initdb failed"; }
			# A throwaway cluster for development and tests: durability off for speed
			# (fsync), loopback only, enough connections for the benchmarks.
			# PG_SYNCHRONOUS_COMMIT=on keeps every acknowledged commit across a crash of
			# Postgres itself (not of the machine, with fsync off): make chaos kills it.
			cat >>"$PG_DATA/postgresql.conf" <<-EOF
				listen_addresses = '127.0.0.1'
				port = $PG_PORT
				unix_socket_directories = '$PG_DATA'
				max_connections = 300
				shared_buffers = 256MB
				fsync = off
				synchronous_commit = $PG_SYNCHRONOUS_COMMIT
				full_page_writes = off
				max_wal_size = 2GB
				log_min_messages = warning
			EOF
		fi
		pg_preload
		wait_port_free "$PG_PORT"
		say "starting postgres on 127.0.0.1:$PG_PORT"
		local t0=$SECONDS
		pg_as "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t "$START_TIMEOUT" start >/dev/null ||
			{ show_tail "$PG_LOG"; die "postgres did not start"; }
		say "postgres up in $((SECONDS - t0))s"
	fi
	# A cluster given a standby (pg-standby) has a second node, which may be the primary.
	local port="$PG_PORT"
	if [ -f "$(node_data b)/PG_VERSION" ]; then
		if ! node_running b; then
			wait_port_free "$PG_STANDBY_PORT"
			pg_as "$PG_BIN/pg_ctl" -D "$(node_data b)" -l "$(node_log b)" -w -t "$START_TIMEOUT" start >/dev/null ||
				{ show_tail "$(node_log b)"; die "postgres :$PG_STANDBY_PORT did not start"; }
		fi
		port="$(node_port "$(pg_primary)")"
		say "postgres: the primary is :$port"
	fi
	# Role and database, idempotently.
	local psql=("$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$port" -U postgres -v ON_ERROR_STOP=1)
	if ! "${psql[@]}" -d postgres -tAc "SELECT 1 FROM pg_roles WHERE rolname='$PG_USER'" | grep -q 1; then
		"${psql[@]}" -d postgres -c "CREATE ROLE $PG_USER LOGIN SUPERUSER PASSWORD '$PG_PASSWORD'"
	fi
	if ! "${psql[@]}" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$PG_DB'" | grep -q 1; then
		"${psql[@]}" -d postgres -c "CREATE DATABASE $PG_DB OWNER $PG_USER"
		say "created database $PG_DB"
	fi
	if ! "${psql[@]}" -d postgres -tAc "SHOW shared_preload_libraries" | grep -q pg_stat_statements; then
		say "postgres loads pg_stat_statements (make bench needs it) at its next restart: scripts/services.sh restart-pg"
	fi
}

pg_down() {
	PG_BIN="$(pg_bindir)" || return 0
	local n d first=a
	# The primary first: a fast shutdown sends its last WAL to the standby before it ends.
	[ "$(node_role b)" = primary ] && first=b
	for n in "$first" "$(node_other "$first")"; do
		d="$(node_data "$n")"
		if [ -f "$d/PG_VERSION" ] && node_running "$n"; then
			say "stopping postgres :$(node_port "$n")"
			pg_as "$PG_BIN/pg_ctl" -D "$d" -m fast -w -t 30 stop >/dev/null || pg_as "$PG_BIN/pg_ctl" -D "$d" -m immediate stop >/dev/null || true
		fi
	done
}

# ---------------------------------------------------------------- PostgreSQL: standby and failover

# The nodes of the cluster: a, at PG_PORT in PG_DATA (what pg_up makes), and b, at
# PG_STANDBY_PORT beside it (what pg-standby makes). Either may be the primary.
node_port() { if [ "$1" = a ]; then echo "$PG_PORT"; else echo "$PG_STANDBY_PORT"; fi; }
node_data() { if [ "$1" = a ]; then echo "$PG_DATA"; else echo "$(dirname "$PG_DATA")/data-b"; fi; }
node_log() { if [ "$1" = a ]; then echo "$PG_LOG"; else echo "$(dirname "$PG_DATA")/postgres-b.log"; fi; }
node_other() { if [ "$1" = a ]; then echo b; else echo a; fi; }
# The name a node streams under as a standby (primary_conninfo's application_name), which
# the primary's synchronous_standby_names lists.
node_name() { echo "walletsaga_$(node_port "$1")"; }
node_running() { [ -f "$(node_data "$1")/PG_VERSION" ] && pg_as "$PG_BIN/pg_ctl" -D "$(node_data "$1")" status >/dev/null 2>&1; }
node_sql() {
	"$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$(node_port "$1")" -U postgres -d postgres -v ON_ERROR_STOP=1 -tAc "$2"
}
# node_role NODE: primary, standby, or down (not running, or not answering).
node_role() {
	if ! node_running "$1"; then echo down; return; fi
	case "$(node_sql "$1" 'SELECT pg_is_in_recovery()' 2>/dev/null)" in
	f) echo primary ;;
	t) echo standby ;;
	*) echo down ;;
	esac
}
# pg_primary: the node that is the primary; dies when none is, or both are.
pg_primary() {
	local a b
	a="$(node_role a)" b="$(node_role b)"
	[ "$a" = primary ] && [ "$b" = primary ] && die "both :$PG_PORT and :$PG_STANDBY_PORT are primaries (split brain): stop the one promoted last, then pg-standby"
	if [ "$a" = primary ]; then echo a; elif [ "$b" = primary ]; then echo b; else
		die "no primary runs (:$PG_PORT $a, :$PG_STANDBY_PORT $b)"
	fi
}
# replication NODE: how the primary NODE sees its standby: "<state> <sync_state>" of the
# other node's walsender (streaming sync, streaming async, catchup …), empty for none.
replication() {
	node_sql "$1" "SELECT state || ' ' || sync_state FROM pg_stat_replication WHERE application_name = '$(node_name "$(node_other "$1")")'" 2>/dev/null | head -n1
}
# wait_replication NODE STATE: waits until replication NODE starts with STATE.
wait_replication() {
	local deadline=$((SECONDS + START_TIMEOUT)) got
	while :; do
		got="$(replication "$1")"
		[[ "$got" == "$2"* ]] && return 0
		if [ "$SECONDS" -ge "$deadline" ]; then
			show_tail "$(node_log "$(node_other "$1")")"
			die "the standby :$(node_port "$(node_other "$1")") is not '$2' after ${START_TIMEOUT}s (pg_stat_replication on :$(node_port "$1"): '${got:-no walsender}')"
		fi
		sleep 0.2
	done
}
# pg_url: the URL that reaches the primary, whichever node it is.
pg_url() {
	echo "postgres://$PG_USER:$PG_PASSWORD@127.0.0.1:$PG_PORT,127.0.0.1:$PG_STANDBY_PORT/$PG_DB?sslmode=disable&target_session_attrs=read-write"
}

# standby_up makes the node that is not the primary its synchronous streaming standby: a
# fresh pg_basebackup of the primary (whatever the node held before, a stale standby or an
# old primary fenced by a failover, is deleted), streaming as node_name, and the primary
# waiting for it at every commit (synchronous_standby_names, synchronous_commit on). A
# standby that already streams synchronously is left as it is.
standby_up() {
	PG_BIN="$(pg_bindir)" || die "no PostgreSQL binaries (scripts/services.sh pg-up first)"
	pg_prepare_dir
	local p s pport sport sdata t0=$SECONDS
	p="$(pg_primary)" s="$(node_other "$p")"
	pport="$(node_port "$p")" sport="$(node_port "$s")" sdata="$(node_data "$s")"
	if [ "$(node_role "$s")" = standby ] && [ "$(replication "$p")" = "streaming sync" ]; then
		say "postgres :$sport already streams from :$pport as its synchronous standby"
		return 0
	fi
	if node_running "$s"; then
		say "stopping postgres :$sport to rebuild it as the standby of :$pport"
		pg_as "$PG_BIN/pg_ctl" -D "$sdata" -m immediate -w -t "$START_TIMEOUT" stop >/dev/null || die "postgres :$sport did not stop"
	elif port_busy "$sport"; then
		die "port $sport is taken (pid $(port_pid "$sport")) but not by this repo's cluster; stop it or set PG_STANDBY_PORT"
	fi
	say "pg_basebackup of :$pport into $sdata"
	rm -rf "$sdata"
	mkdir -p "$sdata"
	[ "$(id -u)" = 0 ] && chown postgres: "$sdata"
	chmod 700 "$sdata"
	pg_as "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$pport" -U postgres -D "$sdata" -X stream -c fast --no-sync >"$RUN/pg/basebackup.log" 2>&1 ||
		{ show_tail "$RUN/pg/basebackup.log"; die "pg_basebackup from :$pport failed"; }
	# Each node keeps its socket in its data dir, and pg_basebackup copies the lock files of
	# the sockets there (it skips only the sockets): a copied one stops the standby's start.
	pg_as find "$sdata" -maxdepth 1 -name '.s.PGSQL.*' -delete
	# The copy holds the primary's settings; a standby's own come last, where they win.
	# Promoted, it takes writes alone (no synchronous_standby_names) until pg-standby gives it
	# a standby of its own. It asks for WAL again every half second after losing the primary
	# (a restart of it), so commits, which wait for it, wait no longer than that.
	pg_as sed -i -E '/^(port|unix_socket_directories|primary_conninfo|synchronous_standby_names|wal_retrieve_retry_interval) /d' "$sdata/postgresql.auto.conf"
	pg_as tee -a "$sdata/postgresql.auto.conf" >/dev/null <<-EOF
		port = $sport
		unix_socket_directories = '$sdata'
		primary_conninfo = 'host=127.0.0.1 port=$pport user=postgres application_name=$(node_name "$s")'
		synchronous_standby_names = ''
		wal_retrieve_retry_interval = 500
	EOF
	pg_as touch "$sdata/standby.signal"
	if [ "$(dirname "$PG_DATA")" != "$RUN/pg" ]; then
		# Kept outside the run dir (pg_prepare_dir): linked from it, as the first node is.
		ln -sfn "$sdata" "$RUN/pg/data-b"
		ln -sfn "$(node_log "$s")" "$RUN/pg/postgres-b.log"
	fi
	wait_port_free "$sport"
	pg_as "$PG_BIN/pg_ctl" -D "$sdata" -l "$(node_log "$s")" -w -t "$START_TIMEOUT" start >/dev/null ||
		{ show_tail "$(node_log "$s")"; die "the standby :$sport did not start"; }
	wait_replication "$p" streaming
	# Only now that it streams: a synchronous standby that is not there holds every commit.
	node_sql "$p" "ALTER SYSTEM SET synchronous_standby_names = '\"$(node_name "$s")\"'" >/dev/null
	node_sql "$p" "ALTER SYSTEM SET synchronous_commit = on" >/dev/null
	node_sql "$p" "SELECT pg_reload_conf()" >/dev/null
	wait_replication "$p" "streaming sync"
	say "postgres :$sport streams from :$pport as its synchronous standby (up in $((SECONDS - t0))s)"
}

# failover stops the primary as after a crash, fences it and promotes the synchronous
# standby, which must be streaming synchronously: every commit the primary acknowledged is
# then on it. The old primary must not take writes again: it gets a standby.signal, so that
# if anything starts it, it starts read-only, until pg-standby rebuilds it from the new one.
failover() {
	PG_BIN="$(pg_bindir)" || die "no PostgreSQL binaries"
	local p s pport sport repl t0 deadline
	p="$(pg_primary)" s="$(node_other "$p")"
	pport="$(node_port "$p")" sport="$(node_port "$s")"
	repl="$(replication "$p")"
	[ "$repl" = "streaming sync" ] ||
		die "postgres :$sport is not a synchronous standby of :$pport (${repl:-not streaming}): promoting it could lose acknowledged commits; scripts/services.sh pg-standby first"
	t0="${EPOCHREALTIME/./}"
	say "failover: stopping the primary :$pport as after a crash (immediate)"
	pg_as "$PG_BIN/pg_ctl" -D "$(node_data "$p")" -m immediate -w -t "$START_TIMEOUT" stop >/dev/null ||
		{ show_tail "$(node_log "$p")"; die "the primary :$pport did not stop"; }
	pg_as touch "$(node_data "$p")/standby.signal"
	say "failover: promoting the standby :$sport"
	pg_as "$PG_BIN/pg_ctl" -D "$(node_data "$s")" -w -t "$START_TIMEOUT" promote >/dev/null ||
		{ show_tail "$(node_log "$s")"; die "the standby :$sport was not promoted"; }
	deadline=$((SECONDS + START_TIMEOUT))
	until [ "$(node_role "$s")" = primary ]; do
		[ "$SECONDS" -ge "$deadline" ] && { show_tail "$(node_log "$s")"; die "the promoted :$sport does not answer as a primary"; }
		sleep 0.1
	done
	say "failover: :$sport is the primary, $(((${EPOCHREALTIME/./} - t0) / 1000)) ms after :$pport began to stop; :$pport stays down (fenced) until pg-standby rebuilds it"
}

# ---------------------------------------------------------------- RocketMQ

rmq_jars() {
	if [ -f "$RMQ_LIB/.version" ] && [ "$(cat "$RMQ_LIB/.version")" = "$RMQ_VERSION" ]; then
		return 0
	fi
	command -v mvn >/dev/null || die "Maven (mvn) not found: it resolves the RocketMQ $RMQ_VERSION jars (apt-get install maven)"
	say "resolving RocketMQ $RMQ_VERSION jars with Maven into $RMQ_LIB"
	rm -rf "$RMQ_LIB"
	mkdir -p "$RMQ_LIB"
	local t0=$SECONDS
	if ! mvn -B -ntp -q -f "$ROOT/deploy/rocketmq/pom.xml" -Drocketmq.version="$RMQ_VERSION" \
		dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$RMQ_LIB" >"$RMQ_DIR/mvn.log" 2>&1; then
		show_tail "$RMQ_DIR/mvn.log"
		die "Maven could not resolve org.apache.rocketmq $RMQ_VERSION (see $RMQ_DIR/mvn.log)"
	fi
	ls "$RMQ_LIB"/rocketmq-broker-*.jar >/dev/null 2>&1 || die "Maven ran but no rocketmq-broker jar is in $RMQ_LIB"
	echo "$RMQ_VERSION" >"$RMQ_LIB/.version"
	say "jars resolved in $((SECONDS - t0))s ($(ls "$RMQ_LIB" | wc -l) files)"
}

java_check() {
	command -v java >/dev/null || die "java not found: RocketMQ needs Java 11+ (apt-get install openjdk-17-jre-headless)"
	local v
	v="$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)"
	[ -n "$v" ] && [ "$v" -ge 11 ] || die "java $v found; RocketMQ needs Java 11+"
}

JAVA_OPENS=(
	--add-opens=java.base/java.lang=ALL-UNNAMED
	--add-opens=java.base/java.nio=ALL-UNNAMED
	--add-opens=java.base/java.util=ALL-UNNAMED
	--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED
	--add-opens=java.base/sun.nio.ch=ALL-UNNAMED
	--add-exports=java.base/sun.nio.ch=ALL-UNNAMED
)

# rmq_cmd LOGBACK_CONFIG JVM_OPTS... -- MAIN ARGS... sets CMD to the java command line.
rmq_cmd() {
	local logback="$1"; shift
	local opts=()
	while [ "$1" != "--" ]; do opts+=("$1"); shift; done
	shift
	CMD=(env ROCKETMQ_HOME="$RMQ_DIR/home" java -server "${opts[@]}" -XX:+UseSerialGC
		-Duser.home="$RMQ_DIR/home" -Drmq.logback.configurationFile="$logback"
		"${JAVA_OPENS[@]}" -cp "$RMQ_LIB/*" "$@")
}

mqadmin() {
	# mqadmin signs every request with the keys of $ROCKETMQ_HOME/conf/tools.yml: the admin's.
	mkdir -p "$RMQ_DIR/home/conf"
	(
		umask 077
		printf 'accessKey: %s\nsecretKey: %s\n' "$RMQ_ADMIN_USER" "$RMQ_ADMIN_SECRET" >"$RMQ_DIR/home/conf/tools.yml"
	)
	rmq_cmd rmq.tools.logback.xml -Xms64m -Xmx256m -XX:TieredStopAtLevel=1 -- org.apache.rocketmq.tools.command.MQAdminStartup "$@"
	"${CMD[@]}" 2>&1
}

# Broker i (0-based) is broker-a, broker-b, …; it listens on BROKER_PORT + 20·i (and on that
# port − 2 and + 1), keeps its store in store (broker-a, as before clusters) or store-<letter>,
# and its pid, output and properties in files named after it.
broker_names() {
	local i letters=abcdefghij
	for ((i = 0; i < BROKERS; i++)); do printf 'broker-%s\n' "${letters:i:1}"; done
}
broker_index() {
	local letters=abcdefghij l="${1#broker-}"
	[[ "$1" =~ ^broker-[a-j]$ ]] || die "unknown broker $1 (broker-a … broker-j)"
	local rest="${letters%%"$l"*}"
	echo "${#rest}"
}
broker_port() { echo $((BROKER_PORT + 20 * $(broker_index "$1"))); }
broker_file() {
	# broker_file NAME SUFFIX: broker.pid for broker-a, broker-b.pid for broker-b, …
	if [ "$1" = broker-a ]; then echo "$RMQ_DIR/broker$2"; else echo "$RMQ_DIR/$1$2"; fi
}
broker_store() {
	if [ "$1" = broker-a ]; then echo "$RMQ_DIR/store"; else echo "$RMQ_DIR/store-${1#broker-}"; fi
}

rmq_conf() {
	mkdir -p "$RMQ_DIR/conf" "$RMQ_DIR/home"
	# Properties files: no inline comments, no trailing spaces (they are misread).
	cat >"$RMQ_DIR/conf/namesrv.properties" <<-EOF
		listenPort=$NAMESRV_PORT
		bindAddress=127.0.0.1
		kvConfigPath=$RMQ_DIR/home/namesrv/kvConfig.json
	EOF
}

# acl_check refuses user names and secrets that the broker's JSON settings, tools.yml or
# mqadmin's command line would misread.
acl_check() {
	[ "$RMQ_ACL" = on ] || [ "$RMQ_ACL" = off ] || die "RMQ_ACL must be on or off, got $RMQ_ACL"
	local v
	for v in RMQ_ADMIN_USER RMQ_ADMIN_SECRET RMQ_WALLET_USER RMQ_WALLET_SECRET RMQ_NOTIFIER_USER RMQ_NOTIFIER_SECRET; do
		[[ "${!v}" =~ ^[A-Za-z0-9._-]{6,128}$ ]] || die "$v must be 6–128 letters, digits, '.', '_' or '-'"
	done
}

broker_conf() {
	local name="$1" store props
	store="$(broker_store "$name")"
	props="$(broker_file "$name" .properties)"
	mkdir -p "$RMQ_DIR/conf" "$RMQ_DIR/home" "$store/commitlog"
	# timerWheelEnable=false: the product sends no timer (delayed) messages, and the timer
	# store walks its whole wheel every second: a third of the broker's CPU under the bench.
	cat >"$props" <<-EOF
		brokerClusterName=$CLUSTER
		brokerName=$name
		brokerId=0
		namesrvAddr=$NAMESRV_ADDR
		brokerIP1=127.0.0.1
		bindAddress=127.0.0.1
		listenPort=$(broker_port "$name")
		storePathRootDir=$store
		storePathCommitLog=$store/commitlog
		mappedFileSizeCommitLog=67108864
		flushDiskType=ASYNC_FLUSH
		brokerRole=ASYNC_MASTER
		autoCreateTopicEnable=false
		autoCreateSubscriptionGroup=true
		diskMaxUsedSpaceRatio=95
		cleanFileForciblyEnable=false
		traceTopicEnable=false
		timerWheelEnable=false
	EOF
	if [ "$RMQ_ACL" = on ]; then
		# ACL 2.0: users and their rights live in the broker's store (RocksDB under
		# store/config); the admin is created as a super user on the first start.
		cat >>"$props" <<-EOF
			authenticationEnabled=true
			authenticationProvider=org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider
			authenticationMetadataProvider=org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider
			authorizationEnabled=true
			authorizationProvider=org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider
			authorizationMetadataProvider=org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider
			initAuthenticationUser={"username":"$RMQ_ADMIN_USER","password":"$RMQ_ADMIN_SECRET"}
			innerClientAuthenticationCredentials={"accessKey":"$RMQ_ADMIN_USER","secretKey":"$RMQ_ADMIN_SECRET"}
		EOF
	fi
}

# wait_for LOGFILE PATTERN PID NAME: waits until PATTERN appears in LOGFILE, failing if PID dies.
wait_for() {
	local log="$1" pattern="$2" pid="$3" name="$4" deadline=$((SECONDS + START_TIMEOUT))
	while ! grep -q "$pattern" "$log" 2>/dev/null; do
		if ! pid_alive "$pid"; then
			show_tail "$log"
			die "$name exited during start-up"
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			show_tail "$log"
			die "$name did not report boot success within ${START_TIMEOUT}s"
		fi
		sleep 0.3
	done
}

namesrv_up() {
	local pid
	pid="$(read_pid "$RMQ_DIR/namesrv.pid")"
	if pid_alive "$pid" && port_busy "$NAMESRV_PORT"; then
		say "name server already running on $NAMESRV_ADDR (pid $pid)"
		return 0
	fi
	port_busy "$NAMESRV_PORT" && die "port $NAMESRV_PORT is taken (pid $(port_pid "$NAMESRV_PORT")) but not by this repo's name server"
	say "starting RocketMQ $RMQ_VERSION name server on $NAMESRV_ADDR"
	local t0=$SECONDS
	: >"$RMQ_DIR/namesrv.out"
	rmq_cmd rmq.namesrv.logback.xml -Xms128m -Xmx128m -Xmn64m -- \
		org.apache.rocketmq.namesrv.NamesrvStartup -c "$RMQ_DIR/conf/namesrv.properties"
	nohup "${CMD[@]}" >>"$RMQ_DIR/namesrv.out" 2>&1 </dev/null &
	echo $! >"$RMQ_DIR/namesrv.pid"
	wait_for "$RMQ_DIR/namesrv.out" "The Name Server boot success" "$!" "name server"
	say "name server up in $((SECONDS - t0))s"
}

broker_up() {
	local name="${1:-broker-a}" pid port pidfile out
	port="$(broker_port "$name")"
	pidfile="$(broker_file "$name" .pid)"
	out="$(broker_file "$name" .out)"
	pid="$(read_pid "$pidfile")"
	if pid_alive "$pid" && port_busy "$port"; then
		say "$name already running on 127.0.0.1:$port (pid $pid)"
		acl_users "$name"
		return 0
	fi
	local p
	for p in "$port" $((port - 2)) $((port + 1)); do
		port_busy "$p" && die "port $p is taken (pid $(port_pid "$p")) but not by this repo's $name"
	done
	broker_conf "$name"
	say "starting RocketMQ $RMQ_VERSION broker $name on 127.0.0.1:$port"
	local t0=$SECONDS
	: >"$out"
	rmq_cmd rmq.broker.logback.xml -Xms256m -Xmx384m -Xmn128m -XX:MaxDirectMemorySize=256m -- \
		org.apache.rocketmq.broker.BrokerStartup -c "$(broker_file "$name" .properties)"
	nohup "${CMD[@]}" >>"$out" 2>&1 </dev/null &
	echo $! >"$pidfile"
	wait_for "$out" "boot success" "$!" "$name"
	say "$name up in $((SECONDS - t0))s"
	# The broker registers with the name server asynchronously: wait until the cluster lists it.
	local deadline=$((SECONDS + START_TIMEOUT)) list
	while :; do
		list="$(mqadmin clusterList -n "$NAMESRV_ADDR" || true)"
		grep -q "$name" <<<"$list" && break
		[ "$SECONDS" -ge "$deadline" ] && { printf '%s\n' "$list" >&2; show_tail "$out"; die "$name not listed by clusterList"; }
		sleep 1
	done
	say "clusterList shows $name ($((SECONDS - t0))s after start)"
	acl_users "$name"
}

# mqadmin_ok ARGS...: runs mqadmin, which exits 0 even when the broker refused, and fails
# unless it printed its success line.
mqadmin_ok() {
	local out
	out="$(mqadmin "$@")"
	if ! grep -q "success" <<<"$out"; then
		printf '%s\n' "$out" >&2
		return 1
	fi
}

# acl_users BROKER: the product's users and their rights on BROKER, created or corrected
# when missing or different (users and rights are per broker, kept in its store).
acl_users() {
	local name="$1" addr
	[ "$RMQ_ACL" = on ] || return 0
	addr="127.0.0.1:$(broker_port "$name")"
	if ! grep -q '^authenticationEnabled=true$' "$(broker_file "$name" .properties)" 2>/dev/null; then
		say "WARNING: $name runs without access control (started before it was on): restart it (scripts/services.sh restart-broker $name)"
		return 0
	fi
	acl_user "$name" "$addr" "$RMQ_WALLET_USER" "$RMQ_WALLET_SECRET"
	acl_user "$name" "$addr" "$RMQ_NOTIFIER_USER" "$RMQ_NOTIFIER_SECRET"
	local rule
	{
		printf '%s\n' "$RMQ_WALLET_USER Topic:$RMQ_EVENTS_TOPIC Pub"
		notifier_rules "$RMQ_NOTIFIER_USER" "$RMQ_EVENTS_TOPIC" "$RMQ_NOTIFIER_GROUP"
	} | while read -r rule; do
		# shellcheck disable=SC2086 # a rule is three words: subject, resources, actions
		acl_grant "$name" "$addr" $rule
	done
}

# notifier_rules USER TOPIC GROUP: the rights a notifier signing as USER needs, one rule a
# line (subject, resources, actions). Consuming needs Sub; Get too, because a consumer group
# that starts at the end of the topic (CONSUME_FROM=last) asks the broker for each queue's
# last offset (GET_MAX_OFFSET, which the broker authorizes as Get): without it those queues
# are never consumed. Its DLQ it publishes to and reads back.
notifier_rules() {
	local user="$1" topic="$2" group="$3"
	printf '%s\n' "$user Topic:$topic,Group:$group,Group:$group-dlq-reconciler Sub,Get" \
		"$user Topic:%DLQ%$group Pub,Sub"
}

# acl_user BROKER ADDR USER SECRET: the user exists on BROKER with SECRET.
acl_user() {
	local name="$1" addr="$2" user="$3" secret="$4" users
	users="$(mqadmin listUser -n "$NAMESRV_ADDR" -b "$addr")"
	if awk -v u="$user" -v p="$secret" '$1 == u && $2 == p && $3 == "Normal" { f = 1 } END { exit !f }' <<<"$users"; then
		return 0
	elif awk -v u="$user" '$1 == u { f = 1 } END { exit !f }' <<<"$users"; then
		mqadmin_ok updateUser -n "$NAMESRV_ADDR" -b "$addr" -u "$user" -p "$secret" || die "updating RocketMQ user $user on $name failed"
		say "$name: RocketMQ user $user: secret updated"
	else
		mqadmin_ok createUser -n "$NAMESRV_ADDR" -b "$addr" -u "$user" -p "$secret" -t Normal || die "creating RocketMQ user $user on $name failed"
		say "$name: RocketMQ user $user created"
	fi
}

# acl_grant BROKER ADDR SUBJECT RESOURCES ACTIONS: SUBJECT may do ACTIONS on RESOURCES on
# BROKER. createAcl replaces a rule of the same subject and resource, so granting again is
# harmless; it is skipped when every resource already has exactly these actions.
acl_grant() {
	local name="$1" addr="$2" subject="$3" resources="$4" actions="$5" acls want missing=0 r
	acls="$(mqadmin listAcl -n "$NAMESRV_ADDR" -b "$addr")"
	want="[${actions//,/, }]"
	for r in ${resources//,/ }; do
		awk -v s="User:$subject" -v r="$r" -v a="$want" '$1 == s && $3 == r && index($0, a) && / Allow *$/ { f = 1 } END { exit !f }' <<<"$acls" || missing=1
	done
	[ "$missing" = 0 ] && return 0
	mqadmin_ok createAcl -n "$NAMESRV_ADDR" -b "$addr" -s "User:$subject" -r "$resources" -a "$actions" -d Allow ||
		die "granting $subject $actions on $resources on $name failed"
	say "$name: RocketMQ user $subject may $actions on $resources"
}

# topic_create TOPIC QUEUES [BROKER]: QUEUES queues on BROKER, or on every broker of the
# cluster that runs (one by one, each checked: mqadmin's cluster-wide form stops at the first
# broker it cannot reach, after the ones before it in its own order, and still prints their
# "success"). A broker that is down is skipped and named; none running is an error.
topic_create() {
	local topic="$1" queues="$2" b grown=() down=()
	if [ -n "${3:-}" ]; then
		topic_create_on "$topic" "$queues" "$3"
		say "topic $topic: $queues queues on $3"
		return
	fi
	for b in $( (broker_names; all_brokers) | sort -u); do
		if pid_alive "$(read_pid "$(broker_file "$b" .pid)")"; then
			topic_create_on "$topic" "$queues" "$b"
			grown+=("$b")
		else
			down+=("$b")
		fi
	done
	[ ${#grown[@]} -gt 0 ] || die "creating topic $topic: no broker runs"
	say "topic $topic: $queues queues on ${grown[*]}${down[*]:+ (down, left as they were: ${down[*]})}"
}

# topic_create_on TOPIC QUEUES BROKER
topic_create_on() {
	local out
	out="$(mqadmin updateTopic -n "$NAMESRV_ADDR" -b "127.0.0.1:$(broker_port "$3")" -t "$1" -r "$2" -w "$2" -o false)"
	# mqadmin exits 0 even when the broker refused: look for its success line.
	if ! grep -q "success" <<<"$out"; then
		printf '%s\n' "$out" >&2
		die "creating topic $1 on $3 failed"
	fi
}

rmq_up() {
	acl_check
	java_check
	rmq_jars
	rmq_conf
	namesrv_up
	local b
	for b in $(broker_names); do broker_up "$b"; done
	local t
	for t in $TOPICS; do topic_create "${t%%:*}" "${t##*:}"; done
}

stop_pid() {
	local name="$1" pidfile="$2" pid
	pid="$(read_pid "$pidfile")"
	if pid_alive "$pid"; then
		say "stopping $name (pid $pid)"
		kill -TERM "$pid" 2>/dev/null || true
		local i
		for i in $(seq 1 100); do
			pid_alive "$pid" || break
			sleep 0.2
		done
		if pid_alive "$pid"; then
			say "$name did not stop in 20s: SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	rm -f "$pidfile"
}

# all_brokers: every broker with a pid file, running or not (a cluster may have grown).
all_brokers() {
	local f n
	for f in "$RMQ_DIR"/broker.pid "$RMQ_DIR"/broker-?.pid; do
		[ -f "$f" ] || continue
		n="$(basename "$f" .pid)"
		[ "$n" = broker ] && n=broker-a
		echo "$n"
	done
}

rmq_down() {
	local b
	for b in $(all_brokers); do stop_pid "$b" "$(broker_file "$b" .pid)"; done
	stop_pid "name server" "$RMQ_DIR/namesrv.pid"
}

status() {
	local pid
	PG_BIN="$(pg_bindir 2>/dev/null)" || PG_BIN=""
	if [ -n "$PG_BIN" ] && [ -f "$(node_data b)/PG_VERSION" ]; then
		# Two nodes: each one's role, and the URL that finds the primary.
		local n
		for n in a b; do say "postgres     $(node_role "$n")  127.0.0.1:$(node_port "$n")  $(node_data "$n")"; done
		say "postgres     DATABASE_URL=$(pg_url)"
	elif [ -n "$PG_BIN" ] && [ -f "$PG_DATA/PG_VERSION" ] && pg_running; then
		say "postgres     running  127.0.0.1:$PG_PORT  db=$PG_DB  DATABASE_URL=postgres://$PG_USER:$PG_PASSWORD@127.0.0.1:$PG_PORT/$PG_DB?sslmode=disable"
	else
		say "postgres     stopped  (127.0.0.1:$PG_PORT)"
	fi
	pid="$(read_pid "$RMQ_DIR/namesrv.pid")"
	if pid_alive "$pid"; then say "name server  running  $NAMESRV_ADDR  pid=$pid"; else say "name server  stopped  ($NAMESRV_ADDR)"; fi
	local b
	for b in $( (broker_names; all_brokers) | sort -u); do
		pid="$(read_pid "$(broker_file "$b" .pid)")"
		if pid_alive "$pid"; then
			say "$b     running  127.0.0.1:$(broker_port "$b")  pid=$pid  store=$(broker_store "$b")"
		else
			say "$b     stopped  (127.0.0.1:$(broker_port "$b"))"
		fi
	done
}

cmd="${1:-up}"
shift || true
mkdir -p "$RUN" "$RMQ_DIR"
case "$cmd" in
up)
	pg_up
	rmq_up
	status
	;;
pg-up) pg_up ;;
jars)
	rmq_jars >&2
	echo "$RMQ_LIB"
	;;
rmq-up) rmq_up ;;
down)
	rmq_down
	pg_down
	;;
status) status ;;
clean)
	rmq_down
	pg_down
	say "deleting state under $RUN (keeping the jars)"
	rm -rf "$RUN/pg" "$RMQ_DIR"/store "$RMQ_DIR"/store-? "$RMQ_DIR/home" "$RMQ_DIR"/*.out "$RMQ_DIR"/*.properties
	rm -rf /tmp/walletsaga-pg-"$(printf '%s' "$RUN" | md5sum | cut -c1-12)"
	;;
topic)
	[ $# -eq 2 ] || [ $# -eq 3 ] || die "usage: services.sh topic NAME QUEUES [BROKER]"
	acl_check
	java_check
	rmq_jars
	topic_create "$@"
	;;
notifier-user)
	[ $# -eq 4 ] || die "usage: services.sh notifier-user USER SECRET TOPIC GROUP"
	[ "$RMQ_ACL" = on ] || die "the brokers run without access control (RMQ_ACL=$RMQ_ACL)"
	java_check
	rmq_jars
	for b in $(broker_names); do
		acl_user "$b" "127.0.0.1:$(broker_port "$b")" "$1" "$2"
		notifier_rules "$1" "$3" "$4" | while read -r rule; do
			# shellcheck disable=SC2086 # a rule is three words: subject, resources, actions
			acl_grant "$b" "127.0.0.1:$(broker_port "$b")" $rule
		done
	done
	;;
restart-broker)
	acl_check
	java_check
	b="${1:-broker-a}"
	stop_pid "$b" "$(broker_file "$b" .pid)"
	broker_up "$b"
	;;
kill-broker)
	[ $# -eq 1 ] || die "usage: services.sh kill-broker BROKER"
	pid="$(read_pid "$(broker_file "$1" .pid)")"
	pid_alive "$pid" || die "$1 is not running"
	say "kill -9 $1 (pid $pid)"
	kill -KILL "$pid"
	while pid_alive "$pid"; do sleep 0.1; done
	;;
freeze-broker | thaw-broker)
	[ $# -eq 1 ] || die "usage: services.sh $cmd BROKER"
	pid="$(read_pid "$(broker_file "$1" .pid)")"
	pid_alive "$pid" || die "$1 is not running"
	if [ "$cmd" = freeze-broker ]; then
		say "kill -STOP $1 (pid $pid)"
		kill -STOP "$pid"
	else
		say "kill -CONT $1 (pid $pid)"
		kill -CONT "$pid"
	fi
	;;
start-broker)
	[ $# -eq 1 ] || die "usage: services.sh start-broker BROKER"
	acl_check
	java_check
	rmq_jars
	broker_up "$1"
	;;
reset-offsets)
	[ $# -eq 3 ] || die "usage: services.sh reset-offsets GROUP TOPIC TIME_MS"
	java_check
	rmq_jars
	# -f true: also when the group's consumers run (they are told); a group without running
	# consumers has its offsets set on the brokers, where its consumers read them at start.
	out="$(mqadmin resetOffsetByTime -n "$NAMESRV_ADDR" -g "$1" -t "$2" -s "$3" -f true 2>&1 || true)"
	printf '%s\n' "$out" | grep -Ev '^\s*$' >&2
	printf '%s\n' "$out" | grep -Eiq 'exception|error|failed|not exist' && die "resetOffsetByTime $1 on $2 failed"
	printf '%s\n' "$out" | grep -Eq '^[#[:space:]]*(broker|brokerName)' || die "resetOffsetByTime $1 on $2 printed no offsets"
	say "group $1 on $2 moved back to $3"
	;;
restart-pg)
	PG_BIN="$(pg_bindir)" || die "no PostgreSQL binaries"
	mode="${1:-fast}"
	case "$mode" in fast | immediate) ;; *) die "usage: services.sh restart-pg [immediate]" ;; esac
	# The primary: the first node, or the second after a failover (its standby, if any,
	# streams again once it is back).
	node=a
	[ -f "$(node_data b)/PG_VERSION" ] && node="$(pg_primary)"
	data="$(node_data "$node")" log="$(node_log "$node")"
	say "restarting postgres :$(node_port "$node") ($mode: open sessions are terminated)"
	t0=$SECONDS
	if [ "$mode" = immediate ]; then
		# As after a crash: no shutdown checkpoint; the start replays the WAL.
		pg_as "$PG_BIN/pg_ctl" -D "$data" -m immediate -w -t "$START_TIMEOUT" stop >/dev/null ||
			{ show_tail "$log"; die "postgres did not stop"; }
		pg_as "$PG_BIN/pg_ctl" -D "$data" -l "$log" -w -t "$START_TIMEOUT" start >/dev/null ||
			{ show_tail "$log"; die "postgres did not start after an immediate stop"; }
	else
		pg_as "$PG_BIN/pg_ctl" -D "$data" -l "$log" -m fast -w -t "$START_TIMEOUT" restart >/dev/null ||
			{ show_tail "$log"; die "postgres did not restart"; }
	fi
	say "postgres restarted in $((SECONDS - t0))s"
	;;
pg-standby) standby_up ;;
pg-failover) failover ;;
*) die "unknown command $cmd (up|down|status|clean|topic|reset-offsets|restart-broker|kill-broker|start-broker|restart-pg|pg-standby|pg-failover)" ;;
esac

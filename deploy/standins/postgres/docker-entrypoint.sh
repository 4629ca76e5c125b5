#!/bin/sh
# The upstream image's entrypoint, as far as docker-compose.yml relies on it: at the first
# start (an empty PGDATA) initdb with POSTGRES_USER as the superuser and POSTGRES_PASSWORD as
# its password, a server on the Unix socket only that creates POSTGRES_DB, then the real
# server listening on every interface, password authentication from other hosts.
set -eu
if [ "${1:-}" = postgres ] && [ "$(id -u)" = 0 ]; then
	mkdir -p "$PGDATA"
	chown postgres:postgres "$PGDATA"
	chmod 700 "$PGDATA"
	exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
if [ "${1:-}" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
	: "${POSTGRES_PASSWORD:?the stand-in, like the upstream image, needs POSTGRES_PASSWORD}"
	user="${POSTGRES_USER:-postgres}" db="${POSTGRES_DB:-${POSTGRES_USER:-postgres}}"
	pwfile="$(mktemp)"
	printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
	initdb -D "$PGDATA" --username="$user" --pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 >/dev/null
	rm -f "$pwfile"
	printf "listen_addresses = '*'\n" >>"$PGDATA/postgresql.conf"
	printf 'host all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
	pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories=/var/run/postgresql" -w start >/dev/null
	if [ "$db" != postgres ]; then
		psql -v ON_ERROR_STOP=1 -h /var/run/postgresql -U "$user" -d postgres -qc "CREATE DATABASE \"$db\""
	fi
	pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
	echo "PostgreSQL init process complete; ready for start up."
fi
exec "$@"

#!/usr/bin/env bash
# Installs schemathesis (the property-based API tester that `make test` runs against both
# services' OpenAPI documents, see e2e/contract_test.go) at a pinned version into a Python
# venv under the run directory: .run/tools/schemathesis-<version>/, or under
# $WALLETSAGA_RUN_DIR when set. Idempotent: a venv is used only once complete (its .complete
# file is written last), and two checkouts installing at once take turns on a lock.
#
#   scripts/schemathesis.sh          install if missing, then print the CLI's path
#   scripts/schemathesis.sh --path   print the CLI's path if it is installed, else fail;
#                                    install nothing
set -Eeuo pipefail
VERSION=4.32.5
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUN="${WALLETSAGA_RUN_DIR:-$ROOT/.run}"
DIR="$RUN/tools/schemathesis-$VERSION"
CLI="$DIR/bin/schemathesis"
say() { printf 'schemathesis: %s\n' "$*" >&2; }

if [ "${1:-}" = "--path" ]; then
	[ -f "$DIR/.complete" ] && [ -x "$CLI" ] || { say "not installed in $DIR: run make tools (or scripts/schemathesis.sh)"; exit 1; }
	echo "$CLI"
	exit 0
fi
if [ -f "$DIR/.complete" ] && [ -x "$CLI" ]; then
	echo "$CLI"
	exit 0
fi
command -v python3 >/dev/null || { say "python3 is missing: install Python 3.9+ (Debian: apt-get install python3 python3-venv)"; exit 1; }
mkdir -p "$RUN/tools"
exec 9>"$RUN/tools/schemathesis.lock"
flock 9
# Another installer may have finished while this one waited for the lock.
if [ -f "$DIR/.complete" ] && [ -x "$CLI" ]; then
	echo "$CLI"
	exit 0
fi
say "installing schemathesis $VERSION into $DIR"
rm -rf "$DIR"
if ! python3 -m venv "$DIR" >/dev/null 2>&1; then
	# Debian splits venv's ensurepip into python3-venv.
	if command -v apt-get >/dev/null; then
		say "python3 -m venv failed: installing Debian's python3-venv"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
		rm -rf "$DIR"
		python3 -m venv "$DIR"
	else
		say "python3 -m venv failed: install Python's venv module"
		exit 1
	fi
fi
"$DIR/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "schemathesis==$VERSION" >&2
"$CLI" --version >&2
touch "$DIR/.complete"
echo "$CLI"

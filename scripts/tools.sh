#!/usr/bin/env bash
# Installs the command-line tools the tests need beyond Go: headless Chromium (the SMS log
# page is tested in a real browser) and promtool (the alerting rules are checked and
# unit-tested, see deploy/prometheus_test.go), from Debian's packages, and schemathesis (the
# services are tested against their OpenAPI documents), pinned, into a venv under the run
# directory (scripts/schemathesis.sh). Idempotent.
set -Eeuo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
say() { printf 'tools: %s\n' "$*"; }
die() { echo "tools: $*" >&2; exit 1; }

updated=""
apt_install() { # package...: from Debian's packages, after one apt-get update per run
	command -v apt-get >/dev/null || die "$* missing and no apt-get: install $*"
	export DEBIAN_FRONTEND=noninteractive
	if [ -z "$updated" ]; then
		apt-get update -qq >/dev/null || die "apt-get update failed"
		updated=1
	fi
	apt-get install -y -qq --no-install-recommends "$@" >/dev/null || die "apt-get install $* failed"
}

if ! command -v chromium >/dev/null 2>&1; then
	say "installing chromium from Debian's packages"
	apt_install chromium
	say "$(chromium --version 2>/dev/null || echo chromium installed)"
fi
if ! command -v promtool >/dev/null 2>&1; then
	say "installing promtool (Debian's prometheus package; its server is not started)"
	# The package ships a prometheus service that its install would start. A policy-rc.d
	# that forbids every start (exit 101, the convention deb-systemd-invoke and invoke-rc.d
	# honour) keeps it stopped; one already in place (a container's) is left as it is.
	policy=/usr/sbin/policy-rc.d
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy"
		chmod 755 "$policy"
		trap 'rm -f "$policy"' EXIT
	fi
	apt_install prometheus
	say "$(promtool --version 2>&1 | head -n 1)"
fi
"$ROOT/scripts/schemathesis.sh" >/dev/null || die "installing schemathesis failed"

#!/usr/bin/env bash
# Installs the command-line tools the tests need beyond Go: headless Chromium (the SMS log
# page is tested in a real browser), from Debian's packages, and schemathesis (the services
# are tested against their OpenAPI documents), pinned, into a venv under the run directory
# (scripts/schemathesis.sh). Idempotent.
set -Eeuo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
say() { printf 'tools: %s\n' "$*"; }
if ! command -v chromium >/dev/null 2>&1; then
	command -v apt-get >/dev/null || { echo "tools: chromium missing and no apt-get: install Chromium" >&2; exit 1; }
	say "installing chromium from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null || { echo "tools: apt-get update failed" >&2; exit 1; }
	apt-get install -y -qq --no-install-recommends chromium >/dev/null || { echo "tools: apt-get install chromium failed" >&2; exit 1; }
	say "$(chromium --version 2>/dev/null || echo chromium installed)"
fi
"$ROOT/scripts/schemathesis.sh" >/dev/null || { echo "tools: installing schemathesis failed" >&2; exit 1; }

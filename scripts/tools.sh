#!/usr/bin/env bash
# Installs the command-line tools the tests need beyond Go: headless Chromium (the SMS log
# page is tested in a real browser). Idempotent; uses Debian's packages.
set -Eeuo pipefail
say() { printf 'tools: %s\n' "$*"; }
if command -v chromium >/dev/null 2>&1; then
	exit 0
fi
command -v apt-get >/dev/null || { echo "tools: chromium missing and no apt-get: install Chromium" >&2; exit 1; }
say "installing chromium from Debian's packages"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null || { echo "tools: apt-get update failed" >&2; exit 1; }
apt-get install -y -qq --no-install-recommends chromium >/dev/null || { echo "tools: apt-get install chromium failed" >&2; exit 1; }
say "$(chromium --version 2>/dev/null || echo chromium installed)"

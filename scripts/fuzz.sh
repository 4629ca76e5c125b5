#!/usr/bin/env bash
# Runs every Go fuzz target of the module, one after the other, each for FUZZTIME
# (default 60s; any -fuzztime value: 5s, 10m, 1000x):
#
#   scripts/fuzz.sh [FUZZTIME]
#
# Targets are found with `go test -list '^Fuzz'` in each package whose tests declare one
# (third_party excluded). Go fuzzes one target per invocation, so each runs as
# `go test -run '^$' -fuzz '^Name$' -fuzztime FUZZTIME ./pkg`, without -race (the seeds run
# under -race in the normal test step). The environment passes through: targets on the real
# Postgres need WALLETSAGA_REQUIRE_SERVICES=1 to fail rather than skip when it is missing.
# The first failure stops the run and names the input Go saved under testdata/fuzz/, which
# from then on is a seed of the normal tests. Go keeps the inputs it found interesting in
# its cache ($(go env GOCACHE)/fuzz), so each run starts where the last one stopped.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${1:-${FUZZTIME:-60s}}
GO=${GO:-go}
# The Go the project builds with, as the Makefile pins it (fetched through the module proxy once).
export GOTOOLCHAIN=go1.27.3
say() { printf 'fuzz: %s\n' "$*"; }

# Seconds in a Go duration as the fuzzer prints it ("1m2s", "59s", "1h0m3s").
seconds() {
	awk -v d="$1" 'BEGIN { s = 0; n = ""
		for (i = 1; i <= length(d); i++) { c = substr(d, i, 1)
			if (c ~ /[0-9.]/) { n = n c } else if (c == "h") { s += n * 3600; n = "" } else if (c == "m") { s += n * 60; n = "" } else if (c == "s") { s += n; n = "" } }
		print s }'
}

# The test timeout: the fuzzing time plus room for building and the seed corpus.
case $FUZZTIME in
*x) timeout=30m ;;
*) timeout="$(($(seconds "$FUZZTIME" | cut -d. -f1) + 600))s" ;;
esac

# Packages whose test files declare a fuzz target, then the targets go test lists there. The
# listing is built with -fuzz, as the runs below are (with coverage instrumentation), so
# they reuse its build instead of compiling every package twice.
packages=$($GO list -f '{{.ImportPath}}{{range .TestGoFiles}} {{$.Dir}}/{{.}}{{end}}{{range .XTestGoFiles}} {{$.Dir}}/{{.}}{{end}}' ./...)
targets=()
while read -r pkg files; do
	[[ $pkg == */third_party/* || -z $files ]] && continue
	# shellcheck disable=SC2086 # one word per test file
	grep -qE '^func Fuzz[A-Za-z0-9_]*\(' $files || continue
	listing=$($GO test -list '^Fuzz' -fuzz '^Fuzz' "$pkg" 2>&1) || {
		echo "$listing" >&2
		say "listing the fuzz targets of $pkg failed" >&2
		exit 1
	}
	while read -r name; do targets+=("$pkg $name"); done < <(grep -E '^Fuzz' <<<"$listing")
done <<<"$packages"
if ((${#targets[@]} == 0)); then
	say "no fuzz targets found"
	exit 0
fi
say "${#targets[@]} targets, ${FUZZTIME} each: $(printf '%s\n' "${targets[@]}" | awk '{ printf "%s%s", (NR > 1 ? ", " : ""), $2 }')"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
summary=()
total_start=$(date +%s)
for t in "${targets[@]}"; do
	pkg=${t% *} name=${t#* }
	dir=$($GO list -f '{{.Dir}}' "$pkg")
	rel=./${dir#"$PWD"/}
	say "$name ($rel) for $FUZZTIME"
	start=$(date +%s.%N)
	status=0
	$GO test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -timeout "$timeout" "$pkg" >"$log" 2>&1 || status=$?
	wall=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
	if ((status != 0)); then
		cat "$log" >&2
		say "FAIL: $name in $rel after ${wall}s" >&2
		if crasher=$(grep -oE 'Failing input written to testdata/fuzz/[^ ]+' "$log" | head -1 | sed 's/.* //'); [[ -n $crasher ]]; then
			say "the input that fails: $rel/$crasher (kept as a seed: fix the code, not the file)" >&2
			say "re-run it: go test -run '^${name}/${crasher##*/}\$' $rel" >&2
		fi
		exit "$status"
	fi
	if grep -q -- '--- SKIP' "$log"; then
		say "$name SKIPPED: $(grep -A1 -- '--- SKIP' "$log" | tail -1 | sed 's/^ *//')"
		summary+=("$(printf '%-20s %-28s %s' "$name" "$rel" "skipped")")
		continue
	fi
	# The fuzzer's last progress line: elapsed time, total execs, new interesting inputs.
	last=$(grep -E '^fuzz: elapsed: .*execs: ' "$log" | tail -1 || true)
	if [[ -n $last ]]; then
		elapsed=$(sed -E 's/^fuzz: elapsed: ([0-9hms.]+),.*/\1/' <<<"$last")
		execs=$(sed -E 's/.*execs: ([0-9]+) .*/\1/' <<<"$last")
		interesting=$(sed -nE 's/.*new interesting: ([0-9]+) \(total: ([0-9]+)\).*/\1 new, \2 in corpus/p' <<<"$last")
		rate=$(awk -v n="$execs" -v s="$(seconds "$elapsed")" 'BEGIN { printf "%d", (s > 0 ? n / s : 0) }')
		line=$(printf '%-20s %-28s %9s execs in %6s (%6s/s); interesting: %s; wall %ss' "$name" "$rel" "$execs" "$elapsed" "$rate" "$interesting" "$wall")
	else
		# FUZZTIME ran out while Go was still replaying the cached corpus and the seeds.
		baseline=$(grep -oE 'gathering baseline coverage: [0-9]+/[0-9]+' "$log" | tail -1 | sed 's/.*: //')
		line=$(printf '%-20s %-28s replayed %s of its corpus, no new inputs tried; wall %ss' "$name" "$rel" "${baseline:-none}" "$wall")
	fi
	say "$line"
	summary+=("$line")
done
say "all ${#targets[@]} targets passed in $(($(date +%s) - total_start))s:"
printf '  %s\n' "${summary[@]}"

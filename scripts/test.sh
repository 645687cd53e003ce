#!/usr/bin/env bash
# Every test, from a fresh machine: set-up, build, then
#   1. unit and integration tests on the normal build,
#   2. the integration tests again on the ASan+UBSan build,
#   3. each libFuzzer target for a short run from its seed corpus.
# Ends with one line "N passed, N failed". .ci/run calls this.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }
total_pass=0 total_fail=0
tally() { # LOGFILE: add the counts of a tests/run.sh run
	local line
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1)
	if [ -z "$line" ]; then
		total_fail=$((total_fail + 1))
		return
	fi
	total_pass=$((total_pass + $(echo "$line" | awk '{print $1}')))
	total_fail=$((total_fail + $(echo "$line" | awk '{print $3}')))
}
echo "== build"
if ! make -s; then
	echo "build failed"
	echo "0 passed, 1 failed"
	exit 1
fi
echo "== tests (normal build)"
bash tests/run.sh "${1:-}" 2>&1 | tee /tmp/sightline-tests.log
tally /tmp/sightline-tests.log
echo "== tests (ASan+UBSan build)"
if make -s asan; then
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		SL_BUILD=build-asan SL_BIN=$PWD/build-asan/sightline SL_PROBES=$PWD/build-asan/probe SL_LABEL=asan \
		bash tests/run.sh "${1:-}" 2>&1 | tee /tmp/sightline-tests-asan.log
	tally /tmp/sightline-tests-asan.log
else
	echo "FAIL asan build"
	total_fail=$((total_fail + 1))
fi
echo "== fuzz (${SL_FUZZ_SECONDS:-20} s per target)"
if make -s fuzz; then
	for f in build-fuzz/*; do
		name=$(basename "$f")
		corpus=fuzz/corpus/${name#fuzz_}
		tmp=$(mktemp -d)
		if "$f" -max_total_time="${SL_FUZZ_SECONDS:-20}" -print_final_stats=1 "$tmp" ${corpus:+$( [ -d "$corpus" ] && echo "$corpus")} >"$tmp.log" 2>&1; then
			echo "PASS fuzz/$name ($(grep -o 'stat::number_of_executed_units: *[0-9]*' "$tmp.log" | awk '{print $2}') execs)"
			total_pass=$((total_pass + 1))
		else
			echo "FAIL fuzz/$name"
			tail -n 30 "$tmp.log" | sed 's/^/    | /'
			total_fail=$((total_fail + 1))
		fi
		rm -rf "$tmp" "$tmp.log"
	done
else
	echo "FAIL fuzz build"
	total_fail=$((total_fail + 1))
fi
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]

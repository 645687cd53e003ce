#!/usr/bin/env bash
# The test runner: unit binaries, then every test_* function in tests/integration/*.sh.
# A test exits 0 (pass), 77 (skip: it must print why) or anything else (fail). Under
# SIGHTLINE_MUST_WORK=1 (set by .ci/run) a skip counts as a failure.
# Usage: tests/run.sh [FILTER]   (FILTER: substring of test names to run)
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
export SL_ROOT=$ROOT
export SL_BIN=${SL_BIN:-$ROOT/build/sightline}
export SL_PROBES=${SL_PROBES:-$ROOT/build/probe}
filter=${1:-}
pass=0 fail=0 skip=0
failed=()
run_one() { # name, command...
	local name=$1
	shift
	[ -n "$filter" ] && [[ $name != *"$filter"* ]] && return
	local log
	log=$(mktemp)
	local t0=$SECONDS
	("$@") >"$log" 2>&1
	local rc=$?
	local dt=$((SECONDS - t0))
	if [ $rc -eq 0 ]; then
		pass=$((pass + 1))
		echo "PASS $name (${dt}s)"
	elif [ $rc -eq 77 ] && [ "${SIGHTLINE_MUST_WORK:-0}" != 1 ]; then
		skip=$((skip + 1))
		echo "SKIP $name: $(tail -n 1 "$log")"
	else
		fail=$((fail + 1))
		failed+=("$name")
		[ $rc -eq 77 ] && echo "FAIL $name (skipped, but SIGHTLINE_MUST_WORK=1)" || echo "FAIL $name (exit $rc, ${dt}s)"
		sed 's/^/    | /' "$log" | tail -n 40
	fi
	rm -f "$log"
}
BUILD_DIR=$ROOT/${SL_BUILD:-build}
label=${SL_LABEL:+$SL_LABEL:}
for u in "$BUILD_DIR"/unit/*; do
	[ -x "$u" ] || continue
	run_one "${label}unit/$(basename "$u")" "$u"
done
for f in "$ROOT"/tests/integration/*.sh; do
	[ -f "$f" ] || continue
	for t in $(bash -c "source '$ROOT/tests/lib.sh'; source '$f'; declare -F" | awk '{print $3}' | grep '^test_'); do
		run_one "$label$(basename "$f" .sh)/$t" bash -c "set -eu; source '$ROOT/tests/lib.sh'; source '$f'; $t"
	done
done
[ ${#failed[@]} -gt 0 ] && printf 'failed: %s\n' "${failed[*]}"
if [ $skip -gt 0 ]; then
	echo "$pass passed, $fail failed, $skip skipped"
else
	echo "$pass passed, $fail failed"
fi
[ $fail -eq 0 ]

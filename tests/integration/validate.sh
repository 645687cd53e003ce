# The visibility contract, its static check and the canary acceptance validator (issue 4):
# a clean pass on native, and the negative controls, each of which must fail the acceptance for
# its own reason while the other half of the checks still passes.

CONTRACT=$SL_ROOT/contracts/native.yaml

# validate_run NAME [ARGS...]: run the validator with JSON and JUnit into $SL_TMP/NAME.{json,xml},
# store into $SL_TMP/acc.db; sets VRC, VJSON, VOUT. Removes the evidence directory it kept.
validate_run() {
	local name=$1
	shift
	VJSON=$SL_TMP/$name.json
	set +e
	"$SL_BIN" validate "$@" --json "$VJSON" --junit "$SL_TMP/$name.xml" --db "$SL_TMP/acc.db" >"$SL_TMP/$name.out" 2>"$SL_TMP/$name.err"
	VRC=$?
	set -e
	VOUT=$(cat "$SL_TMP/$name.out")
	if [ -s "$VJSON" ]; then
		local wd
		wd=$(jq -r .workdir "$VJSON")
		case "$wd" in /tmp/sightline-validate.*) rm -rf "$wd" ;; esac
	fi
}
# row_verdict CHECK SUBJECT: the verdict of that row of $VJSON.
row_verdict() { jq -r --arg c "$1" --arg s "$2" '[.rows[] | select(.check==$c and .subject==$s) | .verdict] | join(",")' "$VJSON"; }
# The JUnit file is well-formed XML with this many failures.
junit_failures() { python3 -c "import sys, xml.etree.ElementTree as E; print(E.parse(sys.argv[1]).getroot().find('testsuite').get('failures'))" "$1"; }

test_contract_check_native() {
	set +e
	out=$("$SL_BIN" contract check "$CONTRACT" --runtime native)
	rc=$?
	set -e
	[ $rc = 0 ] || fail "check exit $rc: $out"
	echo "$out" | grep -q '^canary-read  *file.open  *supervisor  *covered' || fail "table: $out"
	json=$("$SL_BIN" contract check "$CONTRACT" --runtime native --json)
	assert_eq "$(echo "$json" | jq -r '.covered')" true "json covered"
	assert_eq "$(echo "$json" | jq -r '[.behaviours[].runtimes.native.verdict] | unique | join(",")')" covered "json verdicts"
	assert_eq "$(echo "$json" | jq -r '.unsupported | length')" 4 "unsupported listed"
}

test_contract_check_two_runtimes() {
	# One column per runtime; the native contract names the supervisor, which gVisor's Sentry is not.
	set +e
	out=$("$SL_BIN" contract check "$CONTRACT" --runtime native --runtime gvisor)
	rc=$?
	set -e
	[ $rc = 1 ] || fail "check exit $rc, expected 1: $out"
	echo "$out" | grep -q '^behaviour .* native  *gvisor' || fail "no two columns: $out"
	echo "$out" | grep -q '^connect-denied  *policy.deny  *supervisor  *covered  *GAP' || fail "policy.deny row: $out"
	echo "$out" | grep -q 'connect-denied on gvisor: gvisor emits policy.deny only from the guest-runtime, not the supervisor' || fail "detail: $out"
	echo "$out" | grep -q 'workload-start on gvisor: missing fields: host_pid' || fail "host_pid detail: $out"
	echo "$out" | grep -q '^workload-exit  *lifecycle.exit  *supervisor  *covered  *covered' || fail "lifecycle.exit row: $out"
	# Declared unsupported for gvisor: no longer a gap, the reason is shown.
	sed 's/^unsupported:$/unsupported:\n  - {op: connect-denied, reason: "the Sentry has no point for a policy refusal", runtimes: [gvisor]}/' \
		"$CONTRACT" >"$SL_TMP/c.yaml"
	json=$("$SL_BIN" contract check "$SL_TMP/c.yaml" --runtime native --runtime gvisor --json || true)
	assert_eq "$(echo "$json" | jq -r '.behaviours[] | select(.id=="connect-denied") | .runtimes.gvisor.verdict')" unsupported "declared"
	assert_eq "$(echo "$json" | jq -r '.behaviours[] | select(.id=="connect-denied") | .runtimes.native.verdict')" covered "native unaffected"
	# The shipped gVisor contract: covered on gvisor, its one unemittable behaviour declared with
	# the reason; the policy.deny the Sentry does emit (opens refused by EROFS) is not the one a
	# blocked connect would need.
	"$SL_BIN" contract check "$SL_ROOT/contracts/gvisor.yaml" --runtime gvisor >"$SL_TMP/g.out" || fail "gvisor contract: $(cat "$SL_TMP/g.out")"
	grep -q '^connect-denied  *policy.deny  *guest-runtime  *unsupported' "$SL_TMP/g.out" || fail "gvisor contract: $(cat "$SL_TMP/g.out")"
	grep -q 'gvisor emits policy.deny but not after blocked-connect' "$SL_TMP/g.out" || fail "gvisor detail: $(cat "$SL_TMP/g.out")"
	assert_eq "$(grep -c ' covered *$' "$SL_TMP/g.out")" 5 "gvisor covered rows"
	# Without the declaration it is a gap, and the check fails.
	python3 - "$SL_ROOT/contracts/gvisor.yaml" "$SL_TMP/g2.yaml" <<'PY'
import sys
lines = open(sys.argv[1]).read().split('\n')
out, skip = [], 0
for l in lines:
    if l.startswith('  - op: connect-denied'):
        skip = 3
    if skip:
        skip -= 1
        continue
    out.append(l)
open(sys.argv[2], 'w').write('\n'.join(out))
PY
	set +e
	"$SL_BIN" contract check "$SL_TMP/g2.yaml" --runtime gvisor >"$SL_TMP/g2.out"
	rc=$?
	set -e
	[ $rc = 1 ] || fail "undeclared connect-denied on gvisor: exit $rc"
	grep -q '^connect-denied  *policy.deny  *guest-runtime  *GAP' "$SL_TMP/g2.out" || fail "gap row: $(cat "$SL_TMP/g2.out")"
	# The contract's two lines: the gvisor capability table really matches what the runtime writes
	# (checked end to end by test_validate_gvisor_pass).
	"$SL_BIN" contract check "$SL_ROOT/contracts/gvisor.yaml" --runtime native --runtime gvisor >"$SL_TMP/g3.out" || true
	grep -q '^process-exec  *process.exec  *guest-runtime  *GAP  *covered' "$SL_TMP/g3.out" || fail "side by side: $(cat "$SL_TMP/g3.out")"
}

test_contract_broken() {
	printf 'contract: x\nbehaviours:\n  - id: a\n    event: process.exec\n    observer: supervisor\n    fields: [pid]\n    max_delay: 2s\n    colour: red\nrisk_classes: {}\n' >"$SL_TMP/bad.yaml"
	set +e
	err=$("$SL_BIN" contract check "$SL_TMP/bad.yaml" --runtime native 2>&1)
	rc=$?
	set -e
	[ $rc = 2 ] || fail "exit $rc, expected 2"
	echo "$err" | grep -qF "$SL_TMP/bad.yaml:8:5: behaviours[]: unknown key \"colour\"" || fail "message: $err"
	set +e
	err=$("$SL_BIN" validate "$SL_TMP/bad.yaml" --runtime native 2>&1)
	rc=$?
	set -e
	[ $rc = 2 ] || fail "validate exit $rc, expected 2"
	echo "$err" | grep -qF "bad.yaml:8:5:" || fail "validate message: $err"
	set +e
	"$SL_BIN" contract check "$CONTRACT" --runtime solaris 2>/dev/null
	rc=$?
	set -e
	[ $rc = 2 ] || fail "unknown runtime: exit $rc"
}

test_validate_native_pass() {
	need_root
	validate_run pass "$CONTRACT" --runtime native
	[ "$VRC" = 0 ] || fail "validate exit $VRC: $VOUT $(cat "$SL_TMP/pass.err")"
	echo "$VOUT" | grep -q 'controls: passed; visibility: passed => ACCEPTED' || fail "summary: $VOUT"
	assert_eq "$(jq -r .passed "$VJSON")" true "json passed"
	assert_eq "$(jq -r '[.rows[].verdict] | unique | join(",")' "$VJSON")" pass "every row passes"
	# Every check a-g is there.
	for c in binding visible fields delay alert control loss recovery; do
		[ -n "$(row_verdict "$c" "$(jq -r --arg c "$c" '[.rows[] | select(.check==$c)][0].subject' "$VJSON")")" ] || fail "no $c row"
	done
	assert_eq "$(row_verdict control blocked-connect)" pass control
	assert_eq "$(row_verdict loss dispatch-paused)" pass loss
	assert_eq "$(row_verdict recovery counts-equal)" pass recovery
	assert_eq "$(jq -r '.rows[] | select(.check=="control") | .kind' "$VJSON")" control "control kind"
	assert_eq "$(junit_failures "$SL_TMP/pass.xml")" 0 "junit failures"
	# Fresh identity and canary per run.
	validate_run pass2 "$CONTRACT" --runtime native --no-store
	[ "$VRC" = 0 ] || fail "second run: $VOUT"
	[ "$(jq -r .identity.tenant "$SL_TMP/pass.json")" != "$(jq -r .identity.tenant "$VJSON")" ] || fail "identity reused"
	[ "$(jq -r .canary_path "$SL_TMP/pass.json")" != "$(jq -r .canary_path "$VJSON")" ] || fail "canary reused"
	# The acceptance is stored with its versions.
	out=$("$SL_BIN" validate --status --db "$SL_TMP/acc.db")
	echo "$out" | grep -q '^pass: contract native-default on native' || fail "status: $out"
	s=$("$SL_BIN" validate --status --db "$SL_TMP/acc.db" --json)
	assert_eq "$(echo "$s" | jq -r .sensor_version)" "$(echo "$s" | jq -r .current_sensor_version)" "sensor version stored"
	echo "$s" | jq -r .runtime_version | grep -q "^linux $(uname -r), landlock abi [0-9]" || fail "runtime version: $s"
}

test_validate_gvisor_pass() {
	need_root
	command -v runsc >/dev/null || skip "runsc is not installed (scripts/setup.sh installs it)"
	# The same checks a-g, driving `sightline run --runtime gvisor`; the one behaviour gVisor
	# cannot emit is declared in the contract, so its rows are n/a with the reason, never a pass.
	validate_run gv "$SL_ROOT/contracts/gvisor.yaml" --runtime gvisor
	[ "$VRC" = 0 ] || fail "validate --runtime gvisor exit $VRC: $VOUT $(cat "$SL_TMP/gv.err")"
	echo "$VOUT" | grep -q 'controls: passed; visibility: passed => ACCEPTED' || fail "summary: $VOUT"
	assert_eq "$(jq -r .runtime "$VJSON")" gvisor "json runtime"
	for c in binding visible fields delay alert control loss recovery; do
		[ "$(jq -r --arg c "$c" '[.rows[] | select(.check==$c)] | length' "$VJSON")" -gt 0 ] || fail "no $c row"
	done
	# Only declared gaps are not a pass: each n/a row names the declaration.
	assert_eq "$(jq -r '[.rows[] | select(.verdict != "pass" and .verdict != "n/a")] | length' "$VJSON")" 0 "failing rows"
	assert_eq "$(jq -r '[.rows[] | select(.verdict == "n/a") | .subject] | unique | join(",")' "$VJSON")" \
		"blocked-connect,connect-denied" "n/a rows"
	jq -r '.rows[] | select(.verdict == "n/a") | .observed' "$VJSON" | grep -qv 'declared unsupported' &&
		fail "an n/a row without its declaration: $(jq -c '.rows[] | select(.verdict == "n/a")' "$VJSON")"
	# The events came from the Sentry: execs, the canary open and the connect (refused inside).
	assert_eq "$(row_verdict visible process-exec)" pass "exec from the guest runtime"
	jq -r '.rows[] | select(.check=="visible" and .subject=="canary-read") | .observed' "$VJSON" | grep -q 'observer gvisor-sentry' || fail "observer"
	assert_eq "$(row_verdict alert canary-read)" pass "canary alert"
	assert_eq "$(row_verdict control blocked-connect)" pass "nothing reached the host listener"
	assert_eq "$(row_verdict loss dispatch-paused)" pass loss
	assert_eq "$(row_verdict loss workload-kept)" pass "kept running"
	assert_eq "$(row_verdict recovery counts-equal)" pass recovery
	# --status --runtime gvisor: the stored acceptance, tied to `runsc --version`.
	rv=$(runsc --version | head -n 1)
	out=$("$SL_BIN" validate --status --runtime gvisor --db "$SL_TMP/acc.db") || fail "status: $out"
	echo "$out" | grep -q '^pass: contract gvisor-default on gvisor' || fail "status: $out"
	s=$("$SL_BIN" validate --status --runtime gvisor --db "$SL_TMP/acc.db" --json)
	assert_eq "$(echo "$s" | jq -r .runtime_version)" "$rv" "runtime version stored"
	assert_eq "$(echo "$s" | jq -r .sensor_version)" gvisor-remote/1 "sensor version stored"
	# The native acceptance is not the gVisor one.
	set +e
	"$SL_BIN" validate --status --runtime native --db "$SL_TMP/acc.db" | grep -q '^none: ' || fail "native has no acceptance"
	set -e
	# Another runsc (an upgrade): the same acceptance is stale.
	mkdir -p "$SL_TMP/bin"
	printf '#!/bin/sh\necho "runsc version 0.0~20990101.0"\necho "spec: 1.0.2"\n' >"$SL_TMP/bin/runsc"
	chmod +x "$SL_TMP/bin/runsc"
	set +e
	out=$(PATH=$SL_TMP/bin:$PATH "$SL_BIN" validate --status --runtime gvisor --db "$SL_TMP/acc.db")
	rc=$?
	set -e
	[ $rc = 1 ] || fail "runsc changed: exit $rc: $out"
	echo "$out" | grep -q '^stale: ' || fail "runsc changed: $out"
	echo "$out" | grep -q 'current: *runtime runsc version 0.0~20990101.0' || fail "current version: $out"
	# No runsc at all: the validation cannot run (exit 3), it does not fail row by row.
	set +e
	err=$(PATH=$SL_TMP/no-bin "$SL_BIN" validate "$SL_ROOT/contracts/gvisor.yaml" --runtime gvisor --no-store 2>&1)
	rc=$?
	set -e
	[ $rc = 3 ] || fail "without runsc: exit $rc: $err"
	echo "$err" | grep -q 'needs runsc' || fail "without runsc: $err"
}

test_validate_uncoverable_behaviour() {
	need_root
	# The contract asks for a field the native sensor never writes: a gap, statically and in the run.
	sed 's/fields: \[executable, argv, pid, cwd, syscall\]/fields: [executable, argv, sha256]/' "$CONTRACT" >"$SL_TMP/c.yaml"
	set +e
	out=$("$SL_BIN" contract check "$SL_TMP/c.yaml" --runtime native)
	rc=$?
	set -e
	[ $rc = 1 ] || fail "check exit $rc, expected 1"
	echo "$out" | grep -q '^process-exec .* GAP' || fail "no GAP row: $out"
	echo "$out" | grep -q 'missing fields: sha256' || fail "detail: $out"
	validate_run uncov "$SL_TMP/c.yaml" --runtime native --no-store
	[ "$VRC" = 1 ] || fail "validate exit $VRC, expected 1: $VOUT"
	assert_eq "$(row_verdict static process-exec)" gap "static gap row"
	assert_eq "$(row_verdict fields process-exec)" fail "fields row"
	jq -r '.rows[] | select(.check=="fields" and .subject=="process-exec") | .observed' "$VJSON" | grep -q 'sha256 absent' ||
		fail "fields detail"
	assert_eq "$(jq -r .controls_passed "$VJSON")" true "controls still pass"
}

test_validate_sensor_skips_opens() {
	need_root
	printf 'sensor:\n  record_opens: false\n' >"$SL_TMP/extra.yaml"
	validate_run noopen "$CONTRACT" --runtime native --no-store --policy-extra "$SL_TMP/extra.yaml"
	[ "$VRC" = 1 ] || fail "exit $VRC, expected 1: $VOUT"
	assert_eq "$(row_verdict visible canary-read)" gap "canary read is a coverage gap"
	jq -r '.rows[] | select(.check=="visible" and .subject=="canary-read") | .observed' "$VJSON" |
		grep -q 'the action happened and no file.open arrived' || fail "gap detail"
	assert_eq "$(row_verdict alert canary-read)" fail "no canary alert"
	assert_eq "$(row_verdict visible process-exec)" pass "execs still seen"
	assert_eq "$(jq -r .controls_passed "$VJSON")" true "controls pass"
	assert_eq "$(jq -r .visibility_passed "$VJSON")" false "visibility fails"
	[ "$(junit_failures "$SL_TMP/noopen.xml")" -ge 2 ] || fail "junit failures"
	grep -q 'type="coverage-gap"' "$SL_TMP/noopen.xml" || fail "junit gap"
}

test_validate_policy_allows_connect() {
	need_root
	port=$((30000 + RANDOM % 20000))
	printf 'network:\n  allow_tcp_connect: [%s]\n' "$port" >"$SL_TMP/extra.yaml"
	validate_run allow "$CONTRACT" --runtime native --no-store --policy-extra "$SL_TMP/extra.yaml" --listen-port "$port"
	[ "$VRC" = 1 ] || fail "exit $VRC, expected 1: $VOUT"
	assert_eq "$(row_verdict control blocked-connect)" fail "control fails"
	jq -r '.rows[] | select(.check=="control") | .observed' "$VJSON" | grep -q 'the connection ARRIVED' || fail "control detail"
	# Every event arrived: visibility alone passes, and that does not make it an acceptance.
	assert_eq "$(jq -r .visibility_passed "$VJSON")" true "visibility passes"
	assert_eq "$(row_verdict visible outbound-connect)" pass "the connect was seen"
	assert_eq "$(jq -r .passed "$VJSON")" false "not accepted"
	echo "$VOUT" | grep -q 'controls: FAILED; visibility: passed => NOT ACCEPTED' || fail "summary: $VOUT"
}

test_validate_gate_disabled() {
	need_root
	validate_run nogate "$CONTRACT" --runtime native --no-store --collectd-flag=--gate-disabled
	[ "$VRC" = 1 ] || fail "exit $VRC, expected 1: $VOUT"
	assert_eq "$(row_verdict loss dispatch-paused)" fail "loss response fails"
	jq -r '.rows[] | select(.subject=="dispatch-paused") | .observed' "$VJSON" | grep -q 'the gate stayed open' || fail "detail"
	assert_eq "$(row_verdict loss blind-detected)" pass "blindness itself is detected"
	assert_eq "$(jq -r .controls_passed "$VJSON")" true "controls pass"
}

test_validate_status_stale() {
	need_root
	validate_run st "$CONTRACT" --runtime native
	[ "$VRC" = 0 ] || fail "validate exit $VRC: $VOUT"
	"$SL_BIN" validate --status --db "$SL_TMP/acc.db" >/dev/null || fail "fresh acceptance not pass"
	# Another runtime version recorded (as after a kernel upgrade), then another sensor version.
	for col in runtime_version sensor_version; do
		cp "$SL_TMP/acc.db" "$SL_TMP/acc-$col.db"
		python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('UPDATE acceptances SET $col = ?', ('older',)); c.commit()" "$SL_TMP/acc-$col.db"
		set +e
		out=$("$SL_BIN" validate --status --db "$SL_TMP/acc-$col.db")
		rc=$?
		set -e
		[ $rc = 1 ] || fail "$col changed: exit $rc"
		echo "$out" | grep -q '^stale: ' || fail "$col changed: $out"
		assert_eq "$("$SL_BIN" validate --status --db "$SL_TMP/acc-$col.db" --json | jq -r .status)" stale "$col json"
	done
	# A failed acceptance is newest: fail, not pass.
	printf 'sensor:\n  record_opens: false\n' >"$SL_TMP/extra.yaml"
	validate_run st2 "$CONTRACT" --runtime native --policy-extra "$SL_TMP/extra.yaml"
	set +e
	out=$("$SL_BIN" validate --status --db "$SL_TMP/acc.db")
	rc=$?
	set -e
	[ $rc = 1 ] && echo "$out" | grep -q '^fail: ' || fail "after a failed run: $rc $out"
	set +e
	out=$("$SL_BIN" validate --status --db "$SL_TMP/empty.db")
	set -e
	echo "$out" | grep -q '^none: ' || fail "empty: $out"
}

test_scheduled_canaries() {
	need_root
	collectd_bg "$SL_TMP/c.sock" "$SL_TMP/c.db" "$SL_TMP/secret" --admin "unix:$SL_TMP/a.sock" --canary-every 2s
	pid=$BG_PID
	trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$SL_TMP"' EXIT
	for _ in $(seq 1 100); do
		grep -q 'scheduled canary 2: ok' "$SL_TMP/collectd.log" && break
		sleep 0.1
	done
	grep -q 'scheduled canary 2: ok' "$SL_TMP/collectd.log" || fail "no second canary ok: $(cat "$SL_TMP/collectd.log")"
	# They went through the whole pipeline: their sandboxes are stored and ended.
	[ "$("$SL_BIN" status --db "$SL_TMP/c.db" --json | jq -r 'select(.tenant=="sightline" and .state=="ended") | .sandbox_id' | wc -l)" -ge 2 ] ||
		fail "canary sandboxes not stored: $("$SL_BIN" status --db "$SL_TMP/c.db")"
	assert_eq "$("$SL_BIN" alerts --db "$SL_TMP/c.db" --json | jq -r 'select(.kind|startswith("canary")) | .kind' | wc -l)" 0 "no canary alert when healthy"
	kill $pid
	wait $pid 2>/dev/null || true
	# A canary sensor that does not see opens: the scheduled canary fails and is alerted.
	printf 'sensor:\n  record_opens: false\n' >"$SL_TMP/cp.yaml"
	chmod 644 "$SL_TMP/cp.yaml"
	collectd_bg "$SL_TMP/c2.sock" "$SL_TMP/c2.db" "$SL_TMP/secret" --admin "unix:$SL_TMP/a2.sock" --canary-every 2s --canary-policy "$SL_TMP/cp.yaml"
	pid=$BG_PID
	for _ in $(seq 1 100); do
		[ -n "$("$SL_BIN" alerts --db "$SL_TMP/c2.db" --json 2>/dev/null | jq -r 'select(.kind=="canary-failed" or .kind=="canary-late")')" ] && break
		sleep 0.1
	done
	a=$("$SL_BIN" alerts --db "$SL_TMP/c2.db" --json | jq -c 'select(.kind=="canary-failed" or .kind=="canary-late")')
	[ -n "$a" ] || fail "no canary alert: $(cat "$SL_TMP/collectd.log")"
	echo "$a" | jq -r .detail | grep -q 'canary read never arrived\|not seen within' || fail "detail: $a"
	assert_eq "$(echo "$a" | jq -r .severity | head -1)" critical severity
}

test_demo_main_job() {
	# The README's first command: the recorded canary workload, then the contract's static check
	# and the validator's table, accepted.
	need_root
	set +e
	out=$(SL_DEMO_DB=$SL_TMP/demo.db bash "$SL_ROOT/scripts/demo.sh" 2>&1)
	rc=$?
	set -e
	[ $rc = 0 ] || fail "demo exit $rc: $(echo "$out" | tail -n 40)"
	echo "$out" | grep -q '^covered: every required behaviour' || fail "no static check: $out"
	echo "$out" | grep -q '^\*control  blocked-connect  *pass' || fail "no control row: $out"
	echo "$out" | grep -q '^recovery  counts-equal  *pass' || fail "no recovery row: $out"
	echo "$out" | grep -q 'controls: passed; visibility: passed => ACCEPTED' || fail "not accepted: $out"
	echo "$out" | grep -q '^pass: contract native-default on native' || fail "no status: $out"
	"$SL_BIN" validate --status --db "$SL_TMP/demo.db" >/dev/null || fail "acceptance not stored"
	# Only this run's own directory (other demos may run on this machine).
	wd=$(echo "$out" | sed -n 's|^== reports: \(/tmp/sightline-demo\.[A-Za-z0-9]*\)/validate.json.*|\1|p')
	[ -n "$wd" ] && rm -rf "$wd"
}

test_validate_high_risk_stop() {
	# High risk: the contract's response is the stop; the blind workload is stopped through the
	# control path, and dispatch pauses too.
	need_root
	validate_run high "$CONTRACT" --runtime native --no-store --risk-class high
	[ "$VRC" = 0 ] || fail "exit $VRC: $VOUT"
	assert_eq "$(row_verdict loss response-stop)" pass "stopped"
	jq -r '.rows[] | select(.subject=="response-stop") | .observed' "$VJSON" | grep -q 'killed: control path (stop)\|blind past' ||
		fail "stop reason: $(jq -c '.rows[] | select(.subject=="response-stop")' "$VJSON")"
	assert_eq "$(row_verdict loss dispatch-paused)" pass "gate high closed"
	[ -z "$(row_verdict loss workload-kept)" ] || fail "a stopped workload is not expected to keep running"
}

test_validator_listen_option() {
	# The validator's listener, on its own: inside the sandbox's network namespace, logging what
	# arrives, outside the sandbox.
	need_root
	port=$((30000 + RANDOM % 20000))
	SL_RUN_FLAGS="--validator-listen $port:$SL_TMP/lis.log" sl_sandbox root "network: {allow_tcp_connect: [$port]}" -- \
		/bin/bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && printf hello >&3 && echo sent"
	[ "$RC" = 0 ] || fail "run exit $RC: $OUT $ERR"
	grep -qx "listening 127.0.0.1:$port" "$SL_TMP/lis.log" || fail "not listening: $(cat "$SL_TMP/lis.log")"
	grep -q '^connection from 127.0.0.1:' "$SL_TMP/lis.log" || fail "connection not logged: $(cat "$SL_TMP/lis.log")"
	grep -qx 'received 5 bytes' "$SL_TMP/lis.log" || fail "bytes not logged: $(cat "$SL_TMP/lis.log")"
	# Nothing of it is in the sandbox: the host's namespace has no such listener.
	! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || fail "the listener is reachable from the host namespace"
	# A bad spec is a usage error, before anything runs.
	set +e
	"$SL_BIN" run --tenant a --agent b --task c --version 1 --credential-ref r --validator-listen "$port:rel" -- /bin/true 2>"$SL_TMP/e"
	rc=$?
	set -e
	[ $rc = 2 ] || fail "bad spec: exit $rc"
	grep -q 'takes PORT:/ABSOLUTE/LOGFILE' "$SL_TMP/e" || fail "message: $(cat "$SL_TMP/e")"
	# Unprivileged, setns is refused (EPERM) and nothing runs.
	mkdir -p "$SL_TMP/u/rec"
	chown -R "$SL_USER:" "$SL_TMP/u"
	set +e
	runuser -u "$SL_USER" -- "$SL_BIN" run --tenant a --agent b --task c --version 1 --credential-ref r \
		--record-dir "$SL_TMP/u/rec" --accept-gap cgroup --accept-gap cgroup-memory --accept-gap cgroup-pids --quiet \
		--validator-listen "$port:$SL_TMP/u/l.log" -- /bin/sh -c 'echo ran' >"$SL_TMP/o" 2>"$SL_TMP/e"
	rc=$?
	set -e
	[ $rc = 125 ] || fail "unprivileged: exit $rc"
	grep -q 'validator listener on 127.0.0.1:.*: Operation not permitted' "$SL_TMP/e" || fail "message: $(cat "$SL_TMP/e")"
	[ ! -s "$SL_TMP/o" ] || fail "the command ran"
}

# The gVisor runtime: `sightline run --runtime gvisor` with runsc as the sandbox and the Sentry's
# runtime-monitoring stream as the sensor. Real runsc, real sink, real records.

need_runsc() {
	need_root
	command -v runsc >/dev/null || skip "runsc is not installed (scripts/setup.sh installs it)"
	command -v python3 >/dev/null || skip "python3 is needed for the hostile-Sentry client"
}

# Start a gVisor sandbox in the background: gv_bg NAME CMD... (sets GV_PID; record dir
# $SL_TMP/rec-NAME). Waits until its sink socket and control socket exist.
gv_bg() {
	local name=$1
	shift
	local ws=$SL_TMP/ws-$name rec=$SL_TMP/rec-$name
	mkdir -p "$ws" "$rec"
	chown 1000:1000 "$ws"
	printf 'workspace: %s\n' "$ws" >"$SL_TMP/policy-$name.yaml"
	"$SL_BIN" run --runtime gvisor --tenant acme --agent agent-7 --task "task-$name" --version v1 \
		--credential-ref cred-1 --policy "$SL_TMP/policy-$name.yaml" --record-dir "$rec" --quiet -- "$@" \
		>"$SL_TMP/out-$name" 2>"$SL_TMP/err-$name" &
	GV_PID=$!
	for _ in $(seq 1 200); do
		local r
		r=$(ls "$rec"/*.jsonl 2>/dev/null | head -n 1)
		if [ -n "$r" ]; then
			local id
			id=$(basename "$r" .jsonl)
			[ -S "$rec/$id.gvisor/sink.sock" ] && [ -S "$rec/$id.ctl" ] && return 0
		fi
		sleep 0.05
	done
	cat "$SL_TMP/err-$name"
	fail "gvisor sandbox $name did not come up"
}

test_gvisor_record() {
	need_runsc
	mkdir -p "$SL_TMP/ws-root"
	echo secret-data >"$SL_TMP/ws-root/in.txt"
	echo canary >"$SL_TMP/ws-root/canary.txt"
	SL_RUN_FLAGS="--runtime gvisor" sl_sandbox root 'canaries: [/workspace/canary.txt]' -- /bin/sh -c \
		'/workspace/probe read /workspace/in.txt; /workspace/probe connect 80; /workspace/probe write /etc/x; /workspace/probe read /workspace/canary.txt; exit 3'
	[ "$RC" = 3 ] || fail "exit status $RC (want the workload's 3): $ERR"
	echo "$OUT" | grep -qx 'CONTENT secret-data' || fail "workload output: $OUT"
	echo "$OUT" | grep -qx 'RESULT connect ECONNREFUSED' || fail "connect: $OUT"
	echo "$OUT" | grep -qx 'RESULT write EACCES' || fail "write /etc/x: $OUT"
	expect_verified
	# Every line is the Sentry observer's, under the launcher's identity.
	assert_eq "$(jq -r .observer "$REC" | sort -u)" gvisor-sentry "observer"
	assert_eq "$(jq -r .identity.agent "$REC" | sort -u)" agent-7 "identity"
	assert_eq "$(rec_q "$REC" 'select(.class=="record.begin") | .manifest.runtime' | tr -d '"')" gvisor "runtime"
	assert_eq "$(rec_q "$REC" 'select(.class=="record.begin") | .manifest.runtime_version' | tr -d '"')" \
		"$(runsc --version | head -n 1)" "runtime version"
	assert_eq "$(rec_q "$REC" 'select(.class=="record.begin") | .manifest.sensor_version' | tr -d '"')" gvisor-remote/1 "sensor version"
	local cid
	cid="sightline-$(basename "$REC" .jsonl)"
	rec_has ".class==\"lifecycle.start\" and .container_id==\"$cid\"" || fail "no lifecycle.start with $cid"
	rec_has '.class=="process.exec" and .syscall=="container/start" and .pid==1 and .argv[0]=="/bin/sh"' ||
		fail "no process.exec for the container's init"
	rec_has '.class=="process.exec" and .executable=="/workspace/probe" and .argv==["/workspace/probe","connect","80"]' ||
		fail "no process.exec of the probe: $(jq -c 'select(.class=="process.exec")' "$REC")"
	rec_has '.class=="file.open" and .path=="/workspace/in.txt" and .result>=0 and .write==false and .canary==false' ||
		fail "no file.open of in.txt"
	rec_has '.class=="file.open" and .path=="/workspace/canary.txt" and .canary==true' || fail "canary not flagged"
	rec_has '.class=="network.connect" and .family=="inet" and .address=="127.0.0.1" and .port==80 and .result==-111 and .errno=="ECONNREFUSED"' ||
		fail "no network.connect: $(jq -c 'select(.class=="network.connect")' "$REC")"
	rec_has '.class=="network.socket" and .domain==2' || fail "no network.socket"
	rec_has '.class=="file.open" and .path=="/etc/x" and .errno=="EACCES" and .ocsf.disposition_id==2' || fail "no refused open"
	expect_deny gvisor openat EACCES
	rec_has '.class=="process.exit" and .exit_code==0' || fail "no process.exit"
	rec_has '.class=="lifecycle.exit" and .exit_code==3 and .reason=="exited"' || fail "no lifecycle.exit 3"
	rec_has '.class=="record.end" and .counts["gvisor.dropped"]==0 and .counts["gvisor.rejected"]==0' || fail "record.end counts"
	# No loss and no rejection in a normal run; the declared gaps only.
	assert_eq "$(jq -c 'select(.class=="sensor.gap" and .accepted!=true)' "$REC" | wc -l)" 0 "run-time gaps"
	# The private directory (bundle, runsc state, sink socket) is gone after the run.
	[ ! -e "${REC%.jsonl}.gvisor" ] || fail "private dir left behind"
}

# The burst: 100,000 opens, then (after the queue drained) one more process, whose points carry
# the Sentry's final dropped_count.
gv_burst() {
	mkdir -p "$SL_TMP/ws-root"
	echo x >"$SL_TMP/ws-root/t.txt"
	sl_sandbox root -- /bin/sh -c '/workspace/probe opens 100000 /workspace/t.txt; sleep 0.5; /workspace/probe noop'
	[ "$RC" = 0 ] || fail "burst failed ($RC): $ERR"
	echo "$OUT" | grep -qx 'COUNT opens 100000' || fail "workload count: $OUT"
	expect_verified
	# grep, then jq on the few gap lines: jq over 100,000 lines would dominate the test's time.
	OPENS=$(grep -c '"class":"file.open".*"path":"/workspace/t.txt"' "$REC" || true)
	grep '"class":"sensor.gap"' "$REC" >"$SL_TMP/gaps" || true
	DROPPED=$(jq -s '[.[] | select(.gap=="gvisor-dropped") | .dropped] | add // 0' "$SL_TMP/gaps")
	TOTAL=$(jq -s '[.[] | select(.gap=="gvisor-dropped") | .dropped_total] | max // 0' "$SL_TMP/gaps")
	echo "recorded opens=$OPENS dropped=$DROPPED (last dropped_total $TOTAL)"
}

# Stall the sink of the running gVisor burst once: wait until its record has 2,000 lines, then stop
# the supervisor for 0.5 s. Gives up after 30 s.
gv_stall_sink_once() {
	local i f pid
	for i in $(seq 1 600); do
		f=$(ls "$SL_TMP"/rec-root/*.jsonl 2>/dev/null | head -n 1 || true)
		if [ -n "$f" ] && [ "$(wc -l <"$f")" -ge 2000 ]; then
			pid=$(pgrep -n -f "^$SL_BIN run .*--runtime gvisor" || true)
			[ -n "$pid" ] || return 0
			kill -STOP "$pid"
			sleep 0.5
			kill -CONT "$pid"
			return 0
		fi
		sleep 0.05
	done
}

test_gvisor_loss_counted() {
	need_runsc
	# Whether the Sentry drops at retries 0 depends on how fast the sink drains: on an idle 2-core
	# machine the sink keeps up. So the sink is stalled on purpose: once the burst is under way the
	# supervisor (whose thread is the sink) is stopped for 0.5 s (SIGSTOP, then SIGCONT) while the
	# workload runs on in runsc; the Sentry's sends then fail with EAGAIN and, at retries 0, it drops
	# and counts. Still up to 3 bursts until one loses points; the accounting below is checked on
	# the burst that did.
	local attempt
	for attempt in 1 2 3; do
		gv_stall_sink_once &
		local staller=$!
		SIGHTLINE_GVISOR_RETRIES=0 SL_RUN_FLAGS="--runtime gvisor" gv_burst
		wait "$staller" || true
		[ "$DROPPED" -gt 0 ] && break
		echo "burst $attempt: nothing dropped, again"
		rm -f "$SL_TMP"/rec-root/*.jsonl
	done
	[ "$DROPPED" -gt 0 ] || fail "with retries 0 the Sentry dropped nothing in 3 bursts: the test could not provoke loss"
	assert_eq "$((OPENS + DROPPED))" 100000 "recorded opens + dropped"
	assert_eq "$TOTAL" "$DROPPED" "the gaps' counts add up to the Sentry's cumulative count"
	head -n 1 "$REC" | jq -e '.manifest.layers.sink_retries==0' >/dev/null || fail "retries not in the manifest"
}

test_gvisor_loss_none_by_default() {
	need_runsc
	# The same stall of the sink as above: with sightline's retries the Sentry waits it out.
	gv_stall_sink_once &
	local staller=$!
	SL_RUN_FLAGS="--runtime gvisor" gv_burst
	wait "$staller" || true
	assert_eq "$DROPPED" 0 "dropped with the default retries"
	assert_eq "$OPENS" 100000 "recorded opens"
}

test_gvisor_hostile_sentry() {
	need_runsc
	# Two sandboxes: A is attacked through its sink socket; B is the one the forged points claim.
	gv_bg a /bin/sleep 3
	local pa=$GV_PID
	gv_bg b /bin/sleep 3
	local pb=$GV_PID
	local ra rb ida idb
	ra=$(ls "$SL_TMP"/rec-a/*.jsonl)
	rb=$(ls "$SL_TMP"/rec-b/*.jsonl)
	ida=$(basename "$ra" .jsonl)
	idb=$(basename "$rb" .jsonl)
	python3 "$SL_ROOT/tests/gvisor_hostile.py" "$SL_TMP/rec-a/$ida.gvisor/sink.sock" "sightline-$ida" "sightline-$idb" \
		>"$SL_TMP/hostile.out" || fail "hostile client failed: $(cat "$SL_TMP/hostile.out")"
	# The wrong handshake got no answer: the sink closed that connection.
	grep -qx 'wrong-handshake reply: (closed)' "$SL_TMP/hostile.out" || fail "wrong handshake answered: $(cat "$SL_TMP/hostile.out")"
	wait "$pa" || fail "sandbox a failed: $(cat "$SL_TMP/err-a")"
	wait "$pb" || fail "sandbox b failed: $(cat "$SL_TMP/err-b")"
	REC=$ra
	expect_verified
	for why in bad-handshake short-header truncated oversized wrong-wire-type bad-varint group unknown-type bad-header-size; do
		rec_has ".class==\"sensor.gap\" and .gap==\"gvisor-malformed\" and .reason==\"$why\"" ||
			fail "no gap for $why: $(jq -c 'select(.class=="sensor.gap")' "$ra")"
	done
	rec_has '.class=="sensor.gap" and .gap=="gvisor-rejected-total" and .rejected==10 and .foreign==2' ||
		fail "totals: $(jq -c 'select(.gap=="gvisor-rejected-total")' "$ra")"
	rec_has ".class==\"sensor.gap\" and .gap==\"gvisor-foreign-container\" and .claimed_container_id==\"sightline-$idb\"" ||
		fail "no foreign-container gap"
	# The sink stayed up: the valid point after all of it is recorded, attributed to A.
	rec_has '.class=="file.open" and .path=="/hostile/valid-after" and .result==3' || fail "valid point after garbage not recorded"
	# The forged points are nobody's event: not in A, not in B.
	[ -z "$(jq -c 'select(.path=="/hostile/foreign-claim" or .path=="/hostile/no-container-id")' "$ra" "$rb")" ] ||
		fail "a forged point was attributed to a sandbox"
	REC=$rb
	expect_verified
	assert_eq "$(jq -c 'select(.class=="sensor.gap" and .accepted!=true)' "$rb" | wc -l)" 0 "gaps in B"
}

test_gvisor_stop_kills_sandbox() {
	need_runsc
	gv_bg s /bin/sh -c 'sleep 60; echo survived'
	local rec id
	rec=$(ls "$SL_TMP"/rec-s/*.jsonl)
	id=$(basename "$rec" .jsonl)
	# The runsc sandbox is running.
	local before
	before=$(pgrep -f -- "sightline-$id" | wc -l)
	[ "$before" -gt 0 ] || fail "no runsc process for sightline-$id"
	local t0=$SECONDS
	python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.send(b"stop test\n"); print(s.recv(64).decode().strip())' \
		"$SL_TMP/rec-s/$id.ctl" >"$SL_TMP/ctl-reply"
	assert_eq "$(cat "$SL_TMP/ctl-reply")" ok "control reply"
	set +e
	wait "$GV_PID"
	local rc=$?
	set -e
	[ $((SECONDS - t0)) -lt 10 ] || fail "stop took $((SECONDS - t0)) s"
	assert_eq "$rc" 137 "status of the stopped workload (as native: 128 + SIGKILL)"
	grep -q survived "$SL_TMP/out-s" && fail "the workload survived the stop"
	REC=$rec
	expect_verified
	rec_has '.class=="control.action" and .action=="stop" and .reason=="test"' || fail "no control.action stop"
	rec_has '.class=="lifecycle.exit" and .reason=="killed: control path (stop)"' || fail "lifecycle.exit reason"
	# Nothing of that runsc sandbox is left (sandbox, gofer, runsc run).
	assert_eq "$(pgrep -f -- "sightline-$id" | wc -l)" 0 "runsc processes left"
}

test_gvisor_collector_export() {
	need_runsc
	local sock=$SL_TMP/collector.sock db=$SL_TMP/collector.db secret=$SL_TMP/collector.secret
	collectd_bg "$sock" "$db" "$secret"
	GV_CPID=$BG_PID
	trap 'kill "$GV_CPID" 2>/dev/null || true; wait "$GV_CPID" 2>/dev/null || true; rm -rf "$SL_TMP"' EXIT
	mkdir -p "$SL_TMP/ws-root"
	echo x >"$SL_TMP/ws-root/f"
	SL_RUN_FLAGS="--runtime gvisor --collector unix:$sock --collector-secret $secret --risk-class high" \
		sl_sandbox root -- /workspace/probe opens 2000 /workspace/f
	[ "$RC" = 0 ] || fail "run failed: $ERR"
	expect_verified
	"$SL_BIN" events --db "$db" --sandbox "$(basename "$REC" .jsonl)" >"$SL_TMP/stored"
	# The same record, byte for byte, through the same exporter.
	cmp "$SL_TMP/stored" "$REC" || fail "collector's copy differs ($(wc -l <"$SL_TMP/stored") vs $(wc -l <"$REC") lines)"
	"$SL_BIN" status --db "$db" | grep -q ' ended ' || fail "sandbox not ended: $("$SL_BIN" status --db "$db")"
	[ "$(grep -c '"class":"file.open".*"path":"/workspace/f"' "$SL_TMP/stored")" = 2000 ] || fail "file.open events stored"
	# The binding names what observed it: taken from the verified record.begin.
	assert_eq "$(sqlite3 "$db" "select runtime || '|' || runtime_version || '|' || sensor_version from bindings")" \
		"gvisor|$(runsc --version | head -n 1)|gvisor-remote/1" "binding's runtime"
}

test_gvisor_stdout_stderr_one_file() {
	need_runsc
	mkdir -p "$SL_TMP/rec"
	# The Sentry keeps its own offset per host descriptor: without the relay, `> f 2>&1` loses lines.
	"$SL_BIN" run --runtime gvisor --tenant t --agent a --task k --version 1 --credential-ref c \
		--record-dir "$SL_TMP/rec" --quiet -- /bin/sh -c 'echo out1; echo err1 >&2; echo out2' >"$SL_TMP/both" 2>&1
	# Nothing lost; the order between the two streams is not kept (two pipes), within each it is.
	assert_eq "$(sort "$SL_TMP/both" | tr '\n' ' ')" "err1 out1 out2 " "stdout and stderr in one file"
	assert_eq "$(grep out "$SL_TMP/both" | tr '\n' ' ')" "out1 out2 " "stdout's own order"
}

test_gvisor_opens_off_is_declared() {
	need_runsc
	mkdir -p "$SL_TMP/ws-root"
	echo x >"$SL_TMP/ws-root/f"
	SL_RUN_FLAGS="--runtime gvisor" sl_sandbox root 'sensor: {record_opens: false}' -- /workspace/probe read /workspace/f
	[ "$RC" = 0 ] || fail "run failed: $ERR"
	expect_verified
	rec_has '.class=="sensor.gap" and .gap=="file.open" and .accepted==true' || fail "no declared file.open gap"
	# The Sentry was not asked for opens: none recorded, the exec still is.
	assert_eq "$(jq -c 'select(.class=="file.open")' "$REC" | wc -l)" 0 "file.open events"
	rec_has '.class=="process.exec" and .argv[0]=="/workspace/probe"' || fail "no process.exec"
}

test_gvisor_container_never_started() {
	need_runsc
	SL_RUN_FLAGS="--runtime gvisor" sl_sandbox root -- /nonexistent
	assert_eq "$RC" 3 "status when runsc cannot start the container"
	echo "$ERR" | grep -q 'not started: runsc failed before the container start' || fail "stderr: $ERR"
	expect_verified
	# Nothing observed is said, not implied by silence.
	rec_has '.class=="sensor.gap" and .gap=="gvisor-no-start"' || fail "no gvisor-no-start gap"
	rec_has '.class=="lifecycle.exit" and .reason=="not started: runsc failed before the container start"' ||
		fail "lifecycle.exit reason"
}

test_gvisor_high_risk_blind_stops_workload() {
	need_runsc
	local sock=$SL_TMP/collector.sock db=$SL_TMP/collector.db secret=$SL_TMP/collector.secret
	collectd_bg "$sock" "$db" "$secret"
	GV_CPID=$BG_PID
	trap 'kill "$GV_CPID" 2>/dev/null || true; wait "$GV_CPID" 2>/dev/null || true; rm -rf "$SL_TMP"' EXIT
	mkdir -p "$SL_TMP/ws-root"
	echo x >"$SL_TMP/ws-root/f"
	# The collector vanishes 1.5 s in; the supervisor's watchdog (2 s) stops the runsc sandbox.
	( sleep 1.5; kill -9 "$GV_CPID" ) &
	local killer=$!
	SL_RUN_FLAGS="--runtime gvisor --collector unix:$sock --collector-secret $secret --risk-class high --max-blind-ms 2000 --drain-seconds 1" \
		sl_sandbox root -- /bin/sh -c 'for i in $(seq 1 200); do /workspace/probe opens 10 /workspace/f >/dev/null; sleep 0.1; done'
	wait "$killer" || true
	assert_eq "$RC" 137 "stopped workload status"
	expect_verified
	rec_has '.class=="control.action" and .action=="stop" and (.reason|test("blind"))' || fail "stop not recorded"
	rec_has '.class=="lifecycle.exit" and .reason=="killed: blind past the high-risk limit"' || fail "exit reason"
}

test_gvisor_export_blind_when_collector_killed() {
	need_runsc
	local sock=$SL_TMP/collector.sock db=$SL_TMP/collector.db secret=$SL_TMP/collector.secret
	collectd_bg "$sock" "$db" "$secret"
	GV_CPID=$BG_PID
	trap 'kill "$GV_CPID" 2>/dev/null || true; wait "$GV_CPID" 2>/dev/null || true; rm -rf "$SL_TMP"' EXIT
	mkdir -p "$SL_TMP/ws-root"
	echo x >"$SL_TMP/ws-root/f"
	# Medium risk, 1 s limit: the collector is killed 1 s in and restarted 3 s later. The same
	# supervisor watch as native (supervise.c) records the blindness and the restore; the
	# workload is not stopped (medium), and nothing it did during the outage is lost.
	( sleep 1; kill -9 "$GV_CPID"; sleep 3
	  collectd_bg "$sock" "$db" "$secret"; echo "$BG_PID" >"$SL_TMP/pid2" ) &
	local killer=$!
	SL_RUN_FLAGS="--runtime gvisor --collector unix:$sock --collector-secret $secret --risk-class medium --max-blind-ms 1000 --drain-seconds 10" \
		sl_sandbox root -- /bin/sh -c 'for i in $(seq 1 60); do /workspace/probe opens 5 /workspace/f >/dev/null; sleep 0.1; done'
	wait "$killer" || true
	GV_CPID=$(cat "$SL_TMP/pid2")
	assert_eq "$RC" 0 "medium-risk workload kept running"
	expect_verified
	echo "$ERR" | grep -q 'export blind: no acknowledgement from unix:' || fail "supervisor did not say it was blind: $ERR"
	rec_has '.class=="export.blind" and .risk_class=="medium" and .max_blind_ms==1000 and .observer=="gvisor-sentry"' ||
		fail "no export.blind in the gVisor record"
	rec_has '.class=="export.restored" and .blind_since_ns > 0' || fail "no export.restored after the collector came back"
	# blind before restored, and the manifest carries the risk class (the binding's).
	assert_eq "$(jq -r 'select(.class=="export.blind" or .class=="export.restored") | .class' "$REC" | head -n 2 | tr '\n' ' ')" \
		"export.blind export.restored " "order"
	rec_has '.class=="record.begin" and .manifest.risk_class=="medium" and .manifest.runtime=="gvisor"' || fail "manifest risk_class"
	rec_has '.class=="lifecycle.exit" and .reason=="exited"' || fail "exit reason"
	# Everything reached the restarted collector.
	"$SL_BIN" events --db "$db" --sandbox "$(basename "$REC" .jsonl)" >"$SL_TMP/stored"
	cmp "$SL_TMP/stored" "$REC" || fail "collector's copy differs ($(wc -l <"$SL_TMP/stored") vs $(wc -l <"$REC") lines)"
}

test_gvisor_revoked_credential_stops_high_risk() {
	need_runsc
	local sock=$SL_TMP/collector.sock db=$SL_TMP/collector.db secret=$SL_TMP/collector.secret
	collectd_bg "$sock" "$db" "$secret"
	GV_CPID=$BG_PID
	trap 'kill "$GV_CPID" 2>/dev/null || true; wait "$GV_CPID" 2>/dev/null || true; rm -rf "$SL_TMP"' EXIT
	mkdir -p "$SL_TMP/ws-root" "$SL_TMP/rec-a"
	chown 1000:1000 "$SL_TMP/ws-root"
	printf 'workspace: %s\n' "$SL_TMP/ws-root" >"$SL_TMP/pa.yaml"
	# A gVisor sandbox's credential reference is revoked on its control socket (recorded with the
	# reference, shipped, enforced by the collector) ...
	"$SL_BIN" run --runtime gvisor --tenant acme --agent agent-7 --task A --version v1 --credential-ref cred-ref-42 \
		--policy "$SL_TMP/pa.yaml" --record-dir "$SL_TMP/rec-a" --quiet --collector "unix:$sock" \
		--collector-secret "$secret" -- /bin/sleep 3 >/dev/null 2>"$SL_TMP/a.err" &
	local a=$! ctl=""
	for _ in $(seq 1 200); do
		ctl=$(ls "$SL_TMP"/rec-a/*.ctl 2>/dev/null | head -n 1)
		[ -n "$ctl" ] && "$SL_BIN" status --db "$db" --json 2>/dev/null | grep -q healthy && break
		sleep 0.05
	done
	[ -n "$ctl" ] || fail "no control socket: $(cat "$SL_TMP/a.err")"
	assert_eq "$(python3 -c "
import socket, sys
c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1]); c.sendall(b'revoke key leaked\n'); print(c.recv(64).decode().strip())" "$ctl")" ok "revoke answer"
	wait "$a" || fail "task A failed: $(cat "$SL_TMP/a.err")"
	REC=$(ls "$SL_TMP"/rec-a/*.jsonl)
	rec_has '.class=="control.action" and .action=="revoke" and .credential_ref=="cred-ref-42" and .reason=="key leaked"' ||
		fail "revoke not recorded with its credential reference"
	for _ in $(seq 1 40); do
		[ "$(sqlite3 "$db" "select count(*) from revoked where credential_ref='cred-ref-42'")" = 1 ] && break
		sleep 0.05
	done
	assert_eq "$(sqlite3 "$db" "select credential_ref from revoked")" cred-ref-42 "revoked at the collector"
	# ... then a high-risk gVisor run with it is refused at its HELLO and its workload stopped, by the
	# same supervisor watch as native.
	SL_RUN_FLAGS="--runtime gvisor --collector unix:$sock --collector-secret $secret --risk-class high" \
		sl_sandbox root -- /bin/sleep 20
	assert_eq "$RC" 137 "a high-risk workload refused by the collector is stopped"
	expect_verified
	rec_has '.class=="control.action" and .by=="supervisor" and (.reason|test("collector refused the sandbox"))' || fail "stop not recorded: $ERR"
	rec_has '.class=="lifecycle.exit" and .reason=="killed: collector refused the credential reference"' || fail "exit reason"
}

test_gvisor_caps_table_matches_record() {
	need_runsc
	mkdir -p "$SL_TMP/ws-root"
	echo x >"$SL_TMP/ws-root/f"
	# A workload that makes every guest-runtime class appear: execs, opens (one relative, one
	# refused by the read-only mount: policy.deny), sockets and binds that work and that are
	# refused, a refused connect, a child process that exits.
	cat >"$SL_TMP/ws-root/w.py" <<'PY'
import os, socket
os.chdir('/workspace')
open('f').read()
try:
    open('/usr/sightline-ro-probe', 'w')
except OSError:
    pass
s = socket.socket(); s.bind(('127.0.0.1', 0)); s.close()
try:  # refused: not a local address (errno on network.bind)
    socket.socket().bind(('192.0.2.1', 4242))
except OSError:
    pass
try:  # refused: no raw sockets without CAP_NET_RAW (errno on network.socket)
    socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)
except OSError:
    pass
c = socket.socket()
try:
    c.connect(('127.0.0.1', 1))
except OSError:
    pass
pid = os.fork()
if pid == 0:
    os._exit(3)
os.waitpid(pid, 0)
PY
	SL_RUN_FLAGS="--runtime gvisor" sl_sandbox root -- /bin/sh -c '/usr/bin/python3 /workspace/w.py && /workspace/probe noop'
	[ "$RC" = 0 ] || fail "run failed: $ERR"
	expect_verified
	"$SL_BIN" contract caps --runtime gvisor --json >"$SL_TMP/caps.json"
	# The table says what the record carries, both ways: every member it lists for a class shows
	# on some line of that class, and every member a line carries is listed (or common).
	python3 - "$SL_TMP/caps.json" "$REC" <<'PY' || fail "the gVisor capability table does not match the record"
import json, sys
caps = json.load(open(sys.argv[1]))
lines = [json.loads(l) for l in open(sys.argv[2])]
common = {"seq", "sandbox_id", "time", "class", "observer", "identity", "prev_hash", "hash"}
want = ["process.exec", "file.open", "network.connect", "network.bind", "network.socket",
        "process.clone", "process.exit", "policy.deny", "lifecycle.start", "lifecycle.exit"]
extra_ok = {"process.exec": {"ppid"}}  # init's ppid 0 only, deliberately not listed
bad = 0
for cc in caps["classes"]:
    ev = cc["event"]
    if ev not in want:
        continue
    got = [l for l in lines if l["class"] == ev]
    if not got:
        print("no %s line in the record" % ev); bad += 1; continue
    for l in got:
        if l["observer"] != caps["record_observer"]:
            print("%s observer %s" % (ev, l["observer"])); bad += 1
    seen = set().union(*[set(l) for l in got]) - common
    listed = set(f for f in cc["fields"] if "." not in f)
    for f in sorted(listed - seen):
        print("%s: listed %s never written" % (ev, f)); bad += 1
    for f in sorted(seen - listed - extra_ok.get(ev, set())):
        print("%s: writes %s, not listed" % (ev, f)); bad += 1
sys.exit(1 if bad else 0)
PY
}

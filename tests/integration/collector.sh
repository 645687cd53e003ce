# The collector (issue 3, first part): authenticated streaming from the supervisor into SQLite,
# resume after a collector outage with nothing lost or duplicated, and the blind interval alerted.

# The stored seqs of a store (of one sandbox if given), through the reader:
# "count|distinct|min|max" (the same text sqlite3 printed for the old per-line table).
stored_seqs() {
	"$SL_BIN" events --db "$1" ${2:+--sandbox "$2"} --json | awk '
		match($0, /"seq":[0-9]+/) {
			s = substr($0, RSTART + 6, RLENGTH - 6) + 0
			if (!(s in seen)) { seen[s] = 1; d++ }
			if (n == 0 || s < mn) mn = s
			if (n == 0 || s > mx) mx = s
			n++
		}
		END { if (n) printf "%d|%d|%d|%d\n", n, d, mn, mx; else print "0|0||" }'
}

# Start a collector in the background: collector_start [EXTRA ARGS]. Sets COLL_PID, COLL_ADDR,
# COLL_DB, COLL_SECRET.
collector_start() {
	COLL_ADDR=unix:$SL_TMP/collector.sock
	COLL_DB=$SL_TMP/collector.db
	COLL_SECRET=$SL_TMP/collector.secret
	COLL_ADMIN=unix:$SL_TMP/admin.sock
	collectd_bg "$SL_TMP/collector.sock" "$COLL_DB" "$COLL_SECRET" --admin "$COLL_ADMIN" "$@"
	COLL_PID=$BG_PID
}
collector_stop() { kill "$COLL_PID" 2>/dev/null || true; wait "$COLL_PID" 2>/dev/null || true; }

test_stream_to_collector() {
	need_root
	local mport
	mport=$(free_port)
	collector_start --metrics tcp:127.0.0.1:$mport
	trap 'collector_stop; rm -rf "$SL_TMP"' EXIT
	mkdir -p "$SL_TMP/ws-root"
	echo x >"$SL_TMP/ws-root/f"
	SL_RUN_FLAGS="--collector $COLL_ADDR --collector-secret $COLL_SECRET --risk-class medium" \
		sl_sandbox root -- /workspace/probe opens 20000 /workspace/f
	[ "$RC" = 0 ] || fail "run failed: $ERR"
	expect_verified
	"$SL_BIN" events --db "$COLL_DB" --sandbox "$(jq -r .sandbox_id "$REC" | head -1)" >"$SL_TMP/stored"
	# Byte for byte the supervisor's record: every event, in order, none twice.
	cmp "$SL_TMP/stored" "$REC" || fail "collector's copy differs from the record ($(wc -l <"$SL_TMP/stored") vs $(wc -l <"$REC") lines)"
	"$SL_BIN" verify "$SL_TMP/stored" >/dev/null || fail "collector's copy does not verify"
	"$SL_BIN" status --db "$COLL_DB" | grep -q ' ended ' || fail "sandbox not ended in status: $("$SL_BIN" status --db "$COLL_DB")"
	# The same through the collector's operator socket.
	"$SL_BIN" status --collector "$COLL_ADMIN" --json | jq -e '.state=="ended"' >/dev/null || fail "status --collector"
	[ "$("$SL_BIN" events --collector "$COLL_ADMIN" --class file.open | wc -l)" -ge 20000 ] || fail "events --collector"
	# Prometheus text on the loopback endpoint.
	python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$mport/metrics').read().decode())" >"$SL_TMP/metrics"
	grep -q "^sightline_events_received_total $(wc -l <"$REC")\$" "$SL_TMP/metrics" || fail "events counter: $(grep events_received "$SL_TMP/metrics")"
	grep -q '^sightline_ingest_latency_seconds_count ' "$SL_TMP/metrics" || fail "no latency histogram"
	grep -q '^sightline_sandboxes{state="blind"} 0$' "$SL_TMP/metrics" || fail "blind gauge"
}

test_collector_outage_resume() {
	need_root
	collector_start --max-blind high=2s,medium=2s,low=2s
	trap 'collector_stop; rm -rf "$SL_TMP"' EXIT
	mkdir -p "$SL_TMP/ws" "$SL_TMP/rec"
	chown 1000:1000 "$SL_TMP/ws"
	cp "$SL_PROBES/probe" "$SL_TMP/ws/probe"
	echo x >"$SL_TMP/ws/f"
	printf 'workspace: %s\n' "$SL_TMP/ws" >"$SL_TMP/p.yaml"
	# Task A keeps working for ~8 s while the collector is killed (1.5 s in) and restarted 5 s
	# later; its supervisor's limit is 2 s. Task B is queued for 3 s in: it must not start while
	# the collector is down or A is blind.
	cat >"$SL_TMP/tasks.jsonl" <<JSON
{"tenant":"acme","agent":"a1","task":"A","version":"1","credential_ref":"c1","risk_class":"medium","max_blind_ms":2000,"policy":"$SL_TMP/p.yaml","command":["/bin/sh","-c","for i in \$(seq 1 80); do /workspace/probe opens 50 /workspace/f >/dev/null; sleep 0.1; done"]}
{"tenant":"acme","agent":"a1","task":"B","version":"1","credential_ref":"c1","risk_class":"medium","policy":"$SL_TMP/p.yaml","not_before_ms":3000,"command":["/workspace/probe","noop"]}
JSON
	( sleep 1.5; date +%s%N >"$SL_TMP/killed_at"; kill -9 "$COLL_PID"; sleep 5; date +%s%N >"$SL_TMP/back_at"
	  collector_start --max-blind high=2s,medium=2s,low=2s; echo "$COLL_PID" >"$SL_TMP/pid2" ) &
	local killer=$!
	"$SL_BIN" dispatch --admin "$COLL_ADMIN" --collector "$COLL_ADDR" --collector-secret "$COLL_SECRET" \
		--record-dir "$SL_TMP/rec" --parallel 2 "$SL_TMP/tasks.jsonl" 2>"$SL_TMP/dispatch.err" | tee "$SL_TMP/dispatch.log"
	wait "$killer"
	COLL_PID=$(cat "$SL_TMP/pid2")
	grep -q '^dispatch: task A exited 0' "$SL_TMP/dispatch.log" || fail "A failed: $(cat "$SL_TMP/dispatch.err")"
	grep -q '^dispatch: paused before task B: ' "$SL_TMP/dispatch.log" || fail "B was never paused"
	grep -q '^dispatch: task B exited 0' "$SL_TMP/dispatch.log" || fail "B did not run after the pause"
	grep -q 'export blind: no acknowledgement' "$SL_TMP/dispatch.err" || fail "the supervisor did not say it was blind: $(cat "$SL_TMP/dispatch.err")"
	local reca recb sid
	reca=$(grep -l '"task":"A"' "$SL_TMP"/rec/*.jsonl)
	recb=$(grep -l '"task":"B"' "$SL_TMP"/rec/*.jsonl)
	"$SL_BIN" verify "$reca" >/dev/null || fail "A's record does not verify"
	sid=$(jq -r .sandbox_id "$reca" | head -1)
	# After the restore every event arrived: the collector's copy is the record byte for byte (seq
	# contiguous, chain verified, 0 lost, 0 duplicated).
	"$SL_BIN" events --db "$COLL_DB" --sandbox "$sid" >"$SL_TMP/stored"
	cmp "$SL_TMP/stored" "$reca" || fail "after the outage the collector's copy differs ($(wc -l <"$SL_TMP/stored") vs $(wc -l <"$reca"))"
	"$SL_BIN" verify "$SL_TMP/stored" >/dev/null || fail "the collector's copy does not verify"
	assert_eq "$(stored_seqs "$COLL_DB" "$sid")" \
		"$(wc -l <"$reca")|$(wc -l <"$reca")|1|$(wc -l <"$reca")" "stored events of A (count, distinct, min, max)"
	"$SL_BIN" alerts --db "$COLL_DB" --json --sandbox "$sid" >"$SL_TMP/alerts"
	python3 - "$reca" "$recb" "$SL_TMP/alerts" "$(cat "$SL_TMP/killed_at")" "$(cat "$SL_TMP/back_at")" <<'PY'
import json, sys
rec = [json.loads(l) for l in open(sys.argv[1])]
recb = [json.loads(l) for l in open(sys.argv[2])]
al = [json.loads(l) for l in open(sys.argv[3])]
killed, back = int(sys.argv[4]), int(sys.argv[5])
limit = 2.0
# The supervisor detected the blind interval itself, while the collector was down.
eb = [e for e in rec if e["class"] == "export.blind"]
er = [e for e in rec if e["class"] == "export.restored"]
assert len(eb) == 1 and len(er) == 1, (len(eb), len(er))
eb, er = eb[0], er[0]
d_ack = (eb["detected_ns"] - eb["last_ack_ns"]) / 1e9
d_kill = (eb["detected_ns"] - killed) / 1e9
print(f"export.blind {d_ack:.2f} s after the last ACK, {d_kill:.2f} s after the kill (limit {limit} s)")
assert limit <= d_ack <= limit + 0.5, d_ack
assert eb["detected_ns"] < back, "detected only after the collector came back"
assert er["restored_ns"] > back, "restored before the collector was back"
# One blind alert in the collector, starting at the supervisor's detection, ended at the restore.
blind = [a for a in al if a["kind"] == "blind"]
assert len(blind) == 1, blind
a = blind[0]
assert a["started_ns"] == eb["detected_ns"], (a, eb)
assert a["ended_ns"] > a["started_ns"] > 0, a
print(f"blind alert from {(a['started_ns'] - killed) / 1e9:.2f} s to {(a['ended_ns'] - killed) / 1e9:.2f} s after the kill")
assert (a["started_ns"] - eb["last_ack_ns"]) / 1e9 <= limit + 0.5
assert a["ended_ns"] >= back
# The queued task did not start while blind.
start_b = recb[0]["manifest"]["started"]
print(f"task B started {(start_b - back) / 1e9:.2f} s after the collector came back")
assert start_b > back and start_b >= a["ended_ns"] - int(0.2e9), (start_b, back, a["ended_ns"])
PY
}

test_high_risk_blind_stops_workload() {
	need_root
	collector_start
	trap 'collector_stop; rm -rf "$SL_TMP"' EXIT
	mkdir -p "$SL_TMP/ws-root"
	echo x >"$SL_TMP/ws-root/f"
	# The collector disappears 1.5 s in; the high-risk workload (limit 2 s) must be stopped by
	# its supervisor within 1 s after the limit, and the stop recorded with its reason.
	( sleep 1.5; date +%s%N >"$SL_TMP/killed_at"; kill -9 "$COLL_PID" ) &
	local killer=$!
	SL_RUN_FLAGS="--collector $COLL_ADDR --collector-secret $COLL_SECRET --risk-class high --max-blind-ms 2000 --drain-seconds 1" \
		sl_sandbox root -- /bin/sh -c 'for i in $(seq 1 200); do /workspace/probe opens 10 /workspace/f >/dev/null; sleep 0.1; done'
	wait "$killer" || true
	[ "$RC" = 137 ] || fail "workload not stopped (status $RC): $ERR"
	expect_verified
	rec_has '.class=="control.action" and .action=="stop" and (.reason|test("blind"))' || fail "stop not recorded"
	rec_has '.class=="lifecycle.exit" and .reason=="killed: blind past the high-risk limit"' || fail "exit reason missing"
	local killed stop
	killed=$(cat "$SL_TMP/killed_at")
	stop=$(jq -r 'select(.class=="control.action") | .time' "$REC")
	python3 -c "
d = ($stop - $killed) / 1e9
print(f'stopped {d:.2f} s after the collector vanished (limit 2 s, allowed up to 3 s)')
assert 1.9 <= d <= 3.0, d"
}

test_dispatch_pauses_while_blind() {
	need_root
	collector_start --max-blind high=2s,medium=2s,low=2s
	trap 'collector_stop; rm -rf "$SL_TMP"' EXIT
	mkdir -p "$SL_TMP/ws" "$SL_TMP/rec"
	chown 1000:1000 "$SL_TMP/ws"
	cp "$SL_PROBES/probe" "$SL_TMP/ws/probe"
	echo x >"$SL_TMP/ws/f"
	printf 'workspace: %s\n' "$SL_TMP/ws" >"$SL_TMP/p.yaml"
	# Task A streams for ~9 s. Task B is due 3 s in, while the collector is down (killed at 1.5 s,
	# back at 6.5 s) and then while A is still blind: it must wait until A is seen again.
	cat >"$SL_TMP/tasks.jsonl" <<JSON
{"tenant":"acme","agent":"a1","task":"A","version":"1","credential_ref":"c1","risk_class":"medium","policy":"$SL_TMP/p.yaml","command":["/bin/sh","-c","for i in \$(seq 1 90); do /workspace/probe opens 20 /workspace/f >/dev/null; sleep 0.1; done"]}
{"tenant":"acme","agent":"a1","task":"B","version":"1","credential_ref":"c1","risk_class":"medium","policy":"$SL_TMP/p.yaml","not_before_ms":3000,"command":["/workspace/probe","noop"]}
JSON
	( sleep 1.5; kill -9 "$COLL_PID"; sleep 5; date +%s%N >"$SL_TMP/back_at"; collector_start --max-blind high=2s,medium=2s,low=2s; echo "$COLL_PID" >"$SL_TMP/pid2" ) &
	local outage=$!
	"$SL_BIN" dispatch --admin "$COLL_ADMIN" --collector "$COLL_ADDR" --collector-secret "$COLL_SECRET" \
		--record-dir "$SL_TMP/rec" --parallel 2 "$SL_TMP/tasks.jsonl" | tee "$SL_TMP/dispatch.log"
	wait "$outage"
	COLL_PID=$(cat "$SL_TMP/pid2")
	grep -q '^dispatch: paused before task B: ' "$SL_TMP/dispatch.log" || fail "B was never paused"
	grep -q '^dispatch: task B exited 0' "$SL_TMP/dispatch.log" || fail "B did not run after the pause"
	local recb back
	recb=$(grep -l '"task":"B"' "$SL_TMP"/rec/*.jsonl)
	back=$(cat "$SL_TMP/back_at")
	python3 -c "
import json
start = json.loads(open('$recb').readline())['manifest']['started']
d = (start - $back) / 1e9
print(f'task B started {d:.2f} s after the collector came back')
assert d > 0, 'B started while the collector was down'"
	"$SL_BIN" alerts --db "$COLL_DB" | grep -q blind || fail "no blind alert"
}

test_operator_stop_through_control_path() {
	need_root
	mkdir -p "$SL_TMP/ws-root" "$SL_TMP/rec-root"
	( for _ in $(seq 1 100); do
		s=$(ls "$SL_TMP"/rec-root/*.ctl 2>/dev/null | head -1)
		if [ -n "$s" ]; then
			sleep 0.3
			python3 -c "
import socket, sys
c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1]); c.sendall(b'stop operator test\n'); print(c.recv(64).decode().strip())" "$s" >"$SL_TMP/ctl_answer"
			break
		fi
		sleep 0.05
	done ) &
	local ctl=$!
	sl_sandbox root 'limits: {wall_seconds: 30}' -- /bin/sleep 20
	wait "$ctl"
	assert_eq "$(cat "$SL_TMP/ctl_answer")" ok "control answer"
	assert_eq "$RC" 137 "stopped workload status"
	expect_verified
	rec_has '.class=="control.action" and .action=="stop" and .peer_uid==0 and .reason=="operator test"' || fail "stop not recorded"
	rec_has '.class=="lifecycle.exit" and .reason=="killed: control path (stop)"' || fail "exit reason"
	[ ! -e "$(ls "$SL_TMP"/rec-root/*.ctl 2>/dev/null)" ] || fail "control socket left behind"
}

test_collector_stops_blind_high_risk() {
	need_root
	collector_start --max-blind high=2s
	trap 'collector_stop; kill "$RELAY" 2>/dev/null; rm -rf "$SL_TMP"' EXIT
	# A relay between supervisor and collector: frozen, it cuts the export path while both ends
	# stay up, so only the collector's liveness check can notice.
	python3 - "$SL_TMP/relay.sock" "${COLL_ADDR#unix:}" <<'PY' &
import os, socket, sys, threading
l = socket.socket(socket.AF_UNIX); l.bind(sys.argv[1]); l.listen(4)
def pipe(a, b):
    try:
        while (d := a.recv(65536)):
            b.sendall(d)
    except OSError:
        pass
    finally:
        a.close(); b.close()
while True:
    c, _ = l.accept()
    u = socket.socket(socket.AF_UNIX); u.connect(sys.argv[2])
    threading.Thread(target=pipe, args=(c, u), daemon=True).start()
    threading.Thread(target=pipe, args=(u, c), daemon=True).start()
PY
	RELAY=$!
	for _ in $(seq 1 50); do [ -S "$SL_TMP/relay.sock" ] && break; sleep 0.05; done
	mkdir -p "$SL_TMP/ws-root"
	echo x >"$SL_TMP/ws-root/f"
	( sleep 1.5; kill -STOP "$RELAY"; date +%s%N >"$SL_TMP/cut_at" ) &
	local cutter=$!
	# The supervisor's own watchdog is set far out: the stop must come from the collector.
	SL_RUN_FLAGS="--collector unix:$SL_TMP/relay.sock --collector-secret $COLL_SECRET --risk-class high --max-blind-ms 60000 --drain-seconds 1" \
		sl_sandbox root 'limits: {wall_seconds: 30}' -- /bin/sh -c 'for i in $(seq 1 200); do /workspace/probe opens 10 /workspace/f >/dev/null; sleep 0.1; done'
	wait "$cutter"
	kill -CONT "$RELAY" 2>/dev/null || true
	assert_eq "$RC" 137 "stopped workload status"
	rec_has '.class=="control.action" and .action=="stop" and (.reason|test("collector"))' || fail "collector's stop not recorded"
	local cut stop
	cut=$(cat "$SL_TMP/cut_at")
	stop=$(jq -r 'select(.class=="control.action") | .time' "$REC")
	python3 -c "
d = ($stop - $cut) / 1e9
print(f'stopped {d:.2f} s after the export path was cut (limit 2 s; must be within 1 s after it)')
assert d <= 3.1, d"
	"$SL_BIN" alerts --db "$COLL_DB" | grep -q stopped || fail "no 'stopped' alert"
}

test_collector_kill9_during_a_million_events() {
	need_root
	collector_start
	trap 'collector_stop; rm -rf "$SL_TMP"' EXIT
	mkdir -p "$SL_TMP/ws-root"
	echo x >"$SL_TMP/ws-root/f"
	# kill -9 of the collector while a million events stream in, restart 2 s later.
	( sleep 8; kill -9 "$COLL_PID"; sleep 2; collector_start; echo "$COLL_PID" >"$SL_TMP/pid2" ) &
	local killer=$!
	SL_RUN_FLAGS="--collector $COLL_ADDR --collector-secret $COLL_SECRET --risk-class medium --drain-seconds 120" \
		sl_sandbox root -- /workspace/probe opens 1000000 /workspace/f
	wait "$killer"
	COLL_PID=$(cat "$SL_TMP/pid2")
	[ "$RC" = 0 ] || fail "run failed ($RC): $ERR"
	expect_verified
	local lines stored dups
	lines=$(wc -l <"$REC")
	stored=$(stored_seqs "$COLL_DB")
	echo "record: $lines lines; collector: $stored (count, distinct, min, max)"
	assert_eq "$stored" "$lines|$lines|1|$lines" "every event once, after the crash"
	[ "$lines" -gt 1000000 ] || fail "fewer than a million events: $lines"
	grep -q 'collector ready' "$SL_TMP/collectd.log" || fail "no restart"
	# The copy is the record, byte for byte.
	"$SL_BIN" events --db "$COLL_DB" --sandbox "$(head -1 "$REC" | jq -r .sandbox_id)" | cmp - "$REC" || fail "stored lines differ from the record"
}

# Ask the collector's gate: gate_ask CLASS [CREDENTIAL_REF]
gate_ask() {
	python3 - "${COLL_ADMIN#unix:}" "$@" <<'PY'
import socket, sys
c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1])
c.sendall(("GATE " + " ".join(sys.argv[2:]) + "\n").encode()); print(c.recv(512).decode().strip())
PY
}

test_supervisor_lost_stops_holding_the_gate() {
	need_root
	collector_start --max-blind high=1s,medium=1s,low=1s
	trap 'collector_stop; rm -rf "$SL_TMP"' EXIT
	mkdir -p "$SL_TMP/ws" "$SL_TMP/rec"
	chown 1000:1000 "$SL_TMP/ws"
	printf 'workspace: %s\n' "$SL_TMP/ws" >"$SL_TMP/p.yaml"
	# A supervisor that dies without record.end (kill -9): its sandbox goes blind, and then its
	# control socket refuses connections, which proves nobody is left to deliver.
	"$SL_BIN" run --tenant acme --agent a --task lost --version 1 --credential-ref c1 --policy "$SL_TMP/p.yaml" \
		--record-dir "$SL_TMP/rec" --quiet --collector "$COLL_ADDR" --collector-secret "$COLL_SECRET" \
		--risk-class medium -- /bin/sleep 3 2>"$SL_TMP/run.err" &
	local sup=$!
	local sid=""
	for _ in $(seq 1 100); do
		sid=$("$SL_BIN" status --db "$COLL_DB" --json 2>/dev/null | jq -r 'select(.state=="healthy") | .sandbox_id' | head -1)
		[ -n "$sid" ] && break
		sleep 0.05
	done
	[ -n "$sid" ] || fail "the sandbox never reached the collector: $(cat "$SL_TMP/run.err")"
	kill -9 "$sup"
	wait "$sup" 2>/dev/null || true
	[ -S "$SL_TMP/rec/$sid.ctl" ] || fail "expected the dead supervisor's control socket left behind"
	local state=""
	for _ in $(seq 1 60); do
		state=$("$SL_BIN" status --db "$COLL_DB" --json | jq -r --arg s "$sid" 'select(.sandbox_id==$s) | .state')
		[ "$state" = ended ] && break
		sleep 0.1
	done
	assert_eq "$state" ended "state of the sandbox whose supervisor died"
	"$SL_BIN" alerts --db "$COLL_DB" --json --sandbox "$sid" >"$SL_TMP/alerts"
	jq -s -e 'map(select(.kind=="supervisor_lost" and .severity=="critical" and (.detail|test("does not answer")))) | length == 1' "$SL_TMP/alerts" >/dev/null ||
		fail "no supervisor_lost alert: $(cat "$SL_TMP/alerts")"
	jq -s -e 'map(select(.kind=="blind")) | length == 1 and all(.ended_ns > 0)' "$SL_TMP/alerts" >/dev/null || fail "the blind alert was not closed: $(cat "$SL_TMP/alerts")"
	assert_eq "$(gate_ask medium)" open "gate for medium after the supervisor was lost"
}

test_reexport_after_restart_does_not_reopen_blind() {
	need_root
	collector_start --max-blind high=1s,medium=1s,low=1s
	trap 'collector_stop; rm -rf "$SL_TMP"' EXIT
	mkdir -p "$SL_TMP/ws-root"
	SL_RUN_FLAGS="--collector $COLL_ADDR --collector-secret $COLL_SECRET --risk-class high" \
		sl_sandbox root -- /workspace/probe noop
	[ "$RC" = 0 ] || fail "run failed: $ERR"
	# The risk class is in the record (record.begin manifest), so export binds with the same one.
	rec_has '.class=="record.begin" and .manifest.risk_class=="high"' || fail "no risk_class in the manifest"
	local sid
	sid=$(jq -r .sandbox_id "$REC" | head -1)
	collector_stop
	collector_start --max-blind high=1s,medium=1s,low=1s
	"$SL_BIN" export --collector "$COLL_ADDR" --collector-secret "$COLL_SECRET" --timeout 10 "$REC" >"$SL_TMP/export.out" 2>&1 ||
		fail "export of a high-risk record: $(cat "$SL_TMP/export.out")"
	grep -q "^$(wc -l <"$REC") of $(wc -l <"$REC") events acknowledged" "$SL_TMP/export.out" || fail "export: $(cat "$SL_TMP/export.out")"
	sleep 2 # past the 1 s limit: a complete record re-delivered is not a blind sandbox
	assert_eq "$("$SL_BIN" status --db "$COLL_DB" --json | jq -r --arg s "$sid" 'select(.sandbox_id==$s) | .state')" ended "state after the re-export"
	assert_eq "$("$SL_BIN" alerts --db "$COLL_DB" --json --sandbox "$sid" | jq -s 'map(select(.kind=="blind")) | length')" 0 "blind alerts"
	assert_eq "$(gate_ask high)" open "gate for high"
	assert_eq "$(sqlite3 "$COLL_DB" "select count(*) from rejects where reason='identity_conflict'")" 0 "identity conflicts"
}

# A damaged finished record: export checks each line's hash and link as it reads it for sending,
# delivers the good lines before the first bad one and stops there with verify's own message.
test_export_of_a_damaged_record_stops_at_the_break() {
	need_root
	command -v sqlite3 >/dev/null || skip "needs the sqlite3 command"
	collector_start
	trap 'collector_stop; rm -rf "$SL_TMP"' EXIT
	mkdir -p "$SL_TMP/ws-root"
	sl_sandbox root -- /workspace/probe noop
	[ "$RC" = 0 ] || fail "run failed: $ERR"
	local n
	n=$(wc -l <"$REC")
	[ "$n" -ge 5 ] || fail "expected at least 5 lines in the record, got $n"
	# 1. seq 3's content changed, its hash left: seqs 1-2 delivered, EDITED at 3.
	python3 - "$REC" "$SL_TMP/edited" <<'PY'
import sys
lines = open(sys.argv[1], "rb").read().split(b"\n")
lines[2] = lines[2].replace(b'"time":1', b'"time":2', 1)
open(sys.argv[2], "wb").write(b"\n".join(lines))
PY
	set +e
	"$SL_BIN" export --collector "$COLL_ADDR" --collector-secret "$COLL_SECRET" --timeout 10 "$SL_TMP/edited" >"$SL_TMP/out" 2>"$SL_TMP/err"
	local rc=$?
	set -e
	assert_eq "$rc" 1 "exit status of the export of an edited record"
	grep -q "does not verify: content does not match its hash (the 2 events before it were delivered)" "$SL_TMP/err" ||
		fail "export of an edited record: $(cat "$SL_TMP/err")"
	grep -q "^2 of $n events acknowledged" "$SL_TMP/out" || fail "export: $(cat "$SL_TMP/out")"
	local sid
	sid=$(head -1 "$REC" | jq -r .sandbox_id)
	assert_eq "$("$SL_BIN" events --db "$COLL_DB" --sandbox "$sid" --json | jq -r .seq | paste -sd,)" "1,2" "stored seqs"
	# 2. seq 4 changed and rehashed: the break is seq 5's link, verify calls seq 4 edited, so
	#    seq 4 is not shipped either (3 was already stored: 1-3 now).
	python3 - "$REC" "$SL_TMP/rehashed" <<'PY'
import hashlib, sys
lines = open(sys.argv[1], "rb").read().split(b"\n")
l = lines[3].replace(b'"time":1', b'"time":2', 1)
cut = len(l) - len(b',"hash":"') - 64 - 2
lines[3] = l[:cut] + b',"hash":"' + hashlib.sha256(l[:cut]).hexdigest().encode() + b'"}'
open(sys.argv[2], "wb").write(b"\n".join(lines))
PY
	set +e
	"$SL_BIN" export --collector "$COLL_ADDR" --collector-secret "$COLL_SECRET" --timeout 10 "$SL_TMP/rehashed" >"$SL_TMP/out" 2>"$SL_TMP/err"
	rc=$?
	set -e
	assert_eq "$rc" 1 "exit status of the export of a rehashed record"
	grep -q "does not verify: seq 5's prev_hash does not match seq 4's hash: seq 4 was changed and rehashed (the 3 events before it were delivered)" "$SL_TMP/err" ||
		fail "export of a rehashed record: $(cat "$SL_TMP/err")"
	assert_eq "$("$SL_BIN" events --db "$COLL_DB" --sandbox "$sid" --json | jq -r .seq | paste -sd,)" "1,2,3" "stored seqs"
	# 3. The intact record then delivers the rest.
	"$SL_BIN" export --collector "$COLL_ADDR" --collector-secret "$COLL_SECRET" --timeout 10 "$REC" >"$SL_TMP/out" 2>&1 ||
		fail "export of the intact record: $(cat "$SL_TMP/out")"
	grep -q "^$n of $n events acknowledged" "$SL_TMP/out" || fail "export: $(cat "$SL_TMP/out")"
	assert_eq "$("$SL_BIN" events --db "$COLL_DB" --sandbox "$sid" | wc -l)" "$n" "stored events"
}

test_readers_open_the_store_read_only() {
	command -v sqlite3 >/dev/null || skip "needs the sqlite3 command"
	mkdir -p "$SL_TMP"
	trap 'rm -rf "$SL_TMP"' EXIT
	local cmd
	for cmd in status events alerts; do
		set +e
		"$SL_BIN" "$cmd" --db "$SL_TMP/no-such.db" >"$SL_TMP/out" 2>"$SL_TMP/err"
		local rc=$?
		set -e
		assert_eq "$rc" 1 "$cmd on a missing store"
		grep -q "no collector store at $SL_TMP/no-such.db: No such file or directory" "$SL_TMP/err" || fail "$cmd: $(cat "$SL_TMP/err")"
		[ ! -e "$SL_TMP/no-such.db" ] || fail "$cmd created a store at the mistyped path"
	done
	# Not a store: refused, and the file is left as it was.
	echo "hello" >"$SL_TMP/notes.txt"
	set +e
	"$SL_BIN" status --db "$SL_TMP/notes.txt" 2>"$SL_TMP/err"
	local rc=$?
	set -e
	assert_eq "$rc" 1 "status on a text file"
	grep -q "$SL_TMP/notes.txt" "$SL_TMP/err" || fail "the error does not name the file: $(cat "$SL_TMP/err")"
	assert_eq "$(cat "$SL_TMP/notes.txt")" hello "the text file"
	# A real store is read through a read-only connection: on a read-only file it still works
	# (a read-write open would fail with "attempt to write a readonly database" on the WAL setup).
	SL_TMP_SECRET=$SL_TMP/s
	collectd_bg "$SL_TMP/c.sock" "$SL_TMP/c.db" "$SL_TMP_SECRET"
	kill "$BG_PID"; wait "$BG_PID" 2>/dev/null || true
	local before
	before=$(sha256sum "$SL_TMP/c.db")
	chattr +i "$SL_TMP/c.db" 2>/dev/null || skip "chattr +i not supported here"
	set +e
	"$SL_BIN" status --db "$SL_TMP/c.db" >"$SL_TMP/out" 2>"$SL_TMP/err"
	rc=$?
	set -e
	chattr -i "$SL_TMP/c.db"
	assert_eq "$rc" 0 "status on an immutable store ($(cat "$SL_TMP/err"))"
	assert_eq "$(sha256sum "$SL_TMP/c.db")" "$before" "store unchanged by a reader"
}

test_revoke_is_enforced() {
	need_root
	collector_start
	trap 'collector_stop; rm -rf "$SL_TMP"' EXIT
	mkdir -p "$SL_TMP/ws" "$SL_TMP/rec" "$SL_TMP/rec2"
	chown 1000:1000 "$SL_TMP/ws"
	cp "$SL_PROBES/probe" "$SL_TMP/ws/probe"
	printf 'workspace: %s\n' "$SL_TMP/ws" >"$SL_TMP/p.yaml"
	local run=("$SL_BIN" run --tenant acme --agent a --version 1 --policy "$SL_TMP/p.yaml" --quiet
		--collector "$COLL_ADDR" --collector-secret "$COLL_SECRET")
	# A running task's credential reference is revoked on its control socket.
	"${run[@]}" --task A --credential-ref cred-x --record-dir "$SL_TMP/rec" --risk-class medium -- /bin/sleep 2 \
		2>"$SL_TMP/a.err" &
	local a=$!
	local ctl=""
	for _ in $(seq 1 100); do
		ctl=$(ls "$SL_TMP"/rec/*.ctl 2>/dev/null | head -1)
		[ -n "$ctl" ] && "$SL_BIN" status --db "$COLL_DB" --json 2>/dev/null | grep -q healthy && break
		sleep 0.05
	done
	[ -n "$ctl" ] || fail "no control socket"
	assert_eq "$(python3 -c "
import socket, sys
c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1]); c.sendall(b'revoke key leaked\n'); print(c.recv(64).decode().strip())" "$ctl")" ok "revoke answer"
	wait "$a" || fail "task A failed: $(cat "$SL_TMP/a.err")"
	REC=$(ls "$SL_TMP"/rec/*.jsonl)
	rec_has '.class=="control.action" and .action=="revoke" and .credential_ref=="cred-x" and .reason=="key leaked"' ||
		fail "revoke not recorded with its credential reference"
	# The collector stored it as revoked, from the shipped event.
	assert_eq "$(sqlite3 "$COLL_DB" "select credential_ref from revoked")" cred-x "revoked credential references"
	sqlite3 "$COLL_DB" "select reason from revoked" | grep -q "key leaked" || fail "the revocation's reason is not stored"
	# (a) the gate refuses a task with it: dispatch says so and does not start it.
	cat >"$SL_TMP/tasks.jsonl" <<JSON
{"tenant":"acme","agent":"a","task":"B","version":"1","credential_ref":"cred-x","risk_class":"low","policy":"$SL_TMP/p.yaml","command":["/workspace/probe","noop"]}
{"tenant":"acme","agent":"a","task":"C","version":"1","credential_ref":"cred-y","risk_class":"low","policy":"$SL_TMP/p.yaml","command":["/workspace/probe","noop"]}
JSON
	set +e
	"$SL_BIN" dispatch --admin "$COLL_ADMIN" --collector "$COLL_ADDR" --collector-secret "$COLL_SECRET" \
		--record-dir "$SL_TMP/rec2" "$SL_TMP/tasks.jsonl" >"$SL_TMP/dispatch.log" 2>&1
	local rc=$?
	set -e
	cat "$SL_TMP/dispatch.log"
	assert_eq "$rc" 1 "dispatch status with a refused task"
	grep -q '^dispatch: task B not started: credential reference cred-x is revoked$' "$SL_TMP/dispatch.log" || fail "B not refused"
	grep -q '^dispatch: task C exited 0$' "$SL_TMP/dispatch.log" || fail "C (another credential) did not run"
	assert_eq "$(grep -l '"task":"B"' "$SL_TMP"/rec2/*.jsonl 2>/dev/null | wc -l)" 0 "records of B"
	# (b) a new sandbox with it is refused at its HELLO (revoked_credential), and a high-risk run
	# whose HELLO is refused stops its workload.
	set +e
	"${run[@]}" --task D --credential-ref cred-x --record-dir "$SL_TMP/rec2" --risk-class high -- /bin/sleep 20 \
		2>"$SL_TMP/d.err"
	rc=$?
	set -e
	cat "$SL_TMP/d.err"
	assert_eq "$rc" 137 "status of the high-risk run with a revoked credential reference"
	REC=$(grep -l '"task":"D"' "$SL_TMP"/rec2/*.jsonl)
	rec_has '.class=="control.action" and .action=="stop" and .by=="supervisor" and (.reason|test("credential reference cred-x is revoked"))' ||
		fail "stop not recorded with its reason"
	rec_has '.class=="lifecycle.exit" and .reason=="killed: collector refused the credential reference"' || fail "exit reason"
	[ "$(sqlite3 "$COLL_DB" "select count from rejects where reason='revoked_credential'")" -ge 1 ] || fail "revoked_credential not counted"
	assert_eq "$(sqlite3 "$COLL_DB" "select count(*) from bindings where task='D'")" 0 "bindings of D"
}

# A healthy but idle high-risk sandbox with a supervisor watchdog limit well under the heartbeat
# period (600 ms < 1 s) keeps running: the collector re-acknowledges idle connections (keep-alive
# ACKs, docs/collector.md), so the watchdog hears from it often enough.
test_idle_high_risk_small_max_blind() {
	need_root
	collector_start
	trap 'collector_stop; rm -rf "$SL_TMP"' EXIT
	mkdir -p "$SL_TMP/ws-root"
	SL_RUN_FLAGS="--collector $COLL_ADDR --collector-secret $COLL_SECRET --risk-class high --max-blind-ms 600 --drain-seconds 1" \
		sl_sandbox root -- /bin/sh -c 'sleep 3'
	[ "$RC" = 0 ] || fail "idle workload stopped or failed (status $RC): $ERR"
	expect_verified
	if rec_has '.class=="control.action" and .action=="stop"'; then
		fail "the watchdog stopped a healthy idle sandbox"
	fi
	rec_has '.class=="lifecycle.exit" and .reason=="exited"' || fail "exit reason is not 'exited'"
}

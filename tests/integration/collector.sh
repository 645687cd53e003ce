# The collector (issue 3, first part): authenticated streaming from the supervisor into SQLite,
# resume after a collector outage with nothing lost or duplicated, and the blind interval alerted.

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
	collector_start --metrics tcp:127.0.0.1:19464
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
	python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:19464/metrics').read().decode())" >"$SL_TMP/metrics"
	grep -q "^sightline_events_received_total $(wc -l <"$REC")\$" "$SL_TMP/metrics" || fail "events counter: $(grep events_received "$SL_TMP/metrics")"
	grep -q '^sightline_ingest_latency_seconds_count ' "$SL_TMP/metrics" || fail "no latency histogram"
	grep -q '^sightline_sandboxes{state="blind"} 0$' "$SL_TMP/metrics" || fail "blind gauge"
}

test_collector_outage_resume() {
	need_root
	collector_start --max-blind high=2s,medium=2s,low=2s
	trap 'collector_stop; rm -rf "$SL_TMP"' EXIT
	mkdir -p "$SL_TMP/ws-root"
	echo x >"$SL_TMP/ws-root/f"
	# The workload keeps working for ~8 s while the collector is killed and, 5 s later, restarted.
	( sleep 1.5; kill -9 "$COLL_PID"; sleep 5; collector_start --max-blind high=2s,medium=2s,low=2s; echo "$COLL_PID" >"$SL_TMP/pid2" ) &
	local killer=$!
	SL_RUN_FLAGS="--collector $COLL_ADDR --collector-secret $COLL_SECRET --risk-class medium --drain-seconds 20" \
		sl_sandbox root -- /bin/sh -c 'for i in $(seq 1 80); do /workspace/probe opens 50 /workspace/f >/dev/null; sleep 0.1; done'
	wait "$killer"
	COLL_PID=$(cat "$SL_TMP/pid2")
	[ "$RC" = 0 ] || fail "run failed: $ERR"
	expect_verified
	local sid
	sid=$(jq -r .sandbox_id "$REC" | head -1)
	"$SL_BIN" events --db "$COLL_DB" --sandbox "$sid" >"$SL_TMP/stored"
	cmp "$SL_TMP/stored" "$REC" || fail "after the outage the collector's copy differs ($(wc -l <"$SL_TMP/stored") vs $(wc -l <"$REC"))"
	# The blind interval was alerted, with a start and an end, and lasted about the outage.
	"$SL_BIN" alerts --db "$COLL_DB" --json --sandbox "$sid" | tee "$SL_TMP/alerts"
	python3 - "$SL_TMP/alerts" <<'PY'
import json, sys
al = [json.loads(l) for l in open(sys.argv[1])]
blind = [a for a in al if a["kind"] == "blind"]
assert blind, "no blind alert"
a = blind[0]
assert a["ended_ns"] > a["started_ns"] > 0, a
d = (a["ended_ns"] - a["started_ns"]) / 1e9
print(f"blind interval {d:.2f} s")
assert 4.0 <= d <= 9.0, d
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
	stored=$(sqlite3 "$COLL_DB" "select count(*), count(distinct seq), min(seq), max(seq) from events")
	echo "record: $lines lines; collector: $stored (count, distinct, min, max)"
	assert_eq "$stored" "$lines|$lines|1|$lines" "every event once, after the crash"
	[ "$lines" -gt 1000000 ] || fail "fewer than a million events: $lines"
	grep -q 'collector ready' "$SL_TMP/collectd.log" || fail "no restart"
	# The copy is the record, byte for byte.
	sqlite3 "$COLL_DB" "select line from events order by seq" | cmp - "$REC" || fail "stored lines differ from the record"
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

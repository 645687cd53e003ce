# The collector under attack: a real collectd on a unix socket, driven by tests/hostile_client.py (a
# from-scratch implementation of docs/protocol.md, standard library only). Each hostile case runs on
# its own fresh connection, between valid sessions of one sandbox; every case must be refused and
# counted under its reason, nothing of it stored, and the collector must keep serving.

# Start a collector in the background (collectd_bg from tests/lib.sh). Sets
# HC_PID, HC_SOCK, HC_DB, HC_SECRET. The master secret is a fresh random one.
hostile_collector_start() {
	HC_SOCK=$SL_TMP/hostile.sock
	HC_DB=$SL_TMP/hostile.db
	HC_SECRET=$SL_TMP/hostile.secret
	[ -e "$HC_SECRET" ] || (umask 077 && head -c 32 /dev/urandom >"$HC_SECRET")
	collectd_bg "$HC_SOCK" "$HC_DB" "$HC_SECRET" "$@"
	HC_PID=$BG_PID
}
hostile_collector_stop() { kill "$HC_PID" 2>/dev/null || true; wait "$HC_PID" 2>/dev/null || true; }

# The rejects table as "reason=count" words, sorted by reason.
hc_rejects() { sqlite3 "$HC_DB" 'SELECT reason || "=" || count FROM rejects ORDER BY reason' | tr '\n' ' ' | sed 's/ $//'; }
# The expected table from HC_EXPECT (reason -> count), in the same form.
hc_expected() {
	local r out=()
	for r in $(printf '%s\n' "${!HC_EXPECT[@]}" | sort); do out+=("$r=${HC_EXPECT[$r]}"); done
	echo "${out[*]}"
}
# Run one client case: hc CASE [ARGS]. Sets HC_OUT (its JSON). Fails if the client says the
# collector misbehaved.
hc() {
	HC_OUT=$("$HC_PY" "$SL_ROOT/tests/hostile_client.py" "$HC_SOCK" "$HC_SECRET" "$SL_TMP/state.json" "$@" \
		2>"$SL_TMP/client.err") || fail "case '$*': $(cat "$SL_TMP/client.err")"
	echo "$* -> $HC_OUT"
}
hc_alive() { kill -0 "$HC_PID" 2>/dev/null || { cat "$SL_TMP/collectd.log"; fail "the collector died ($1)"; }; }
# A valid session: N new lines, acknowledged.
hc_valid() {
	hc valid "$@"
	hc_alive "valid session"
}
# A hostile case expected to be counted under REASON: hc_hostile CASE REASON. The whole rejects
# table must then be exactly the running expectation (so each case is charged with its own reason
# and nothing else), and the collector still alive.
hc_hostile() {
	local case=$1 reason=$2
	hc "$case"
	HC_EXPECT[$reason]=$((${HC_EXPECT[$reason]:-0} + 1))
	local got want
	got=$(hc_rejects)
	want=$(hc_expected)
	[ "$got" = "$want" ] || fail "case $case: rejects table is '$got', expected '$want'"
	hc_alive "after case $case"
	# A connection-level reject: the collector closed the connection and acknowledged nothing.
	if [ "${3:-}" = closes ]; then
		jq -e '.eof == true and ([.frames[] | select(.type == "ack")] | length) == 0' <<<"$HC_OUT" >/dev/null ||
			fail "case $case: expected the connection closed without an ACK, observed $HC_OUT"
	else
		# A line-level reject inside a well-formed frame: nothing stored, so every ACK is the
		# unchanged head (the client's state has not moved).
		local head
		head=$(jq '.next_seq - 1' "$SL_TMP/state.json")
		jq -e --argjson h "$head" '[.frames[] | select(.type == "ack" and .ack != $h)] | length == 0' \
			<<<"$HC_OUT" >/dev/null || fail "case $case: an ACK other than the head $head: $HC_OUT"
	fi
	# docs/protocol.md, Connection: "ERROR (either way, then close)". Checked last (collected), so
	# every other property is established first.
	if jq -e '[.frames[] | .type] | index("error") != null' <<<"$HC_OUT" >/dev/null &&
		! jq -e '(.frames[-1].type == "error") and .eof' <<<"$HC_OUT" >/dev/null; then
		HC_VIOLATIONS+=("case $case: the collector sent an ERROR but did not then close the connection (frames after it: $(jq -c '.frames | (map(.type) | index("error")) as $i | .[$i + 1:]' <<<"$HC_OUT"), connection closed: $(jq .eof <<<"$HC_OUT"))")
	fi
}

test_hostile_collector() {
	command -v python3 >/dev/null || skip "needs python3"
	command -v sqlite3 >/dev/null || skip "needs the sqlite3 command"
	# The interpreter itself, not a version manager's shim: ~25 runs of the client, each 0.1 s, not 0.4.
	HC_PY=$(python3 -c 'import sys; print(sys.executable)')
	local mport
	mport=$(free_port)
	hostile_collector_start --metrics tcp:127.0.0.1:$mport
	trap 'hostile_collector_stop; rm -rf "$SL_TMP"' EXIT
	declare -gA HC_EXPECT=()
	HC_VIOLATIONS=()
	hc init

	hc_valid 3 # record.begin and two more: seq 1..3
	hc_hostile bad_magic bad_magic closes   # version 1's "SLF1" instead of "SLF2" in an otherwise whole HELLO
	hc_valid 2
	hc_hostile truncated truncated_body closes # after a valid HELLO, half an EVENTS frame, then EOF
	hc_valid 2
	hc_hostile oversize oversize closes     # a HELLO header claiming 1 MiB + 1: refused at 12 bytes
	jq -e '.seconds < 2' <<<"$HC_OUT" >/dev/null || fail "oversize: refused only after $(jq .seconds <<<"$HC_OUT") s"
	hc_valid 2
	hc_hostile replay replay closes         # a valid EVENTS frame (stored), then the same bytes again
	hc_valid 2
	# frame_seq 3 where 2 is due: the codec has one reason for a repeated and a skipped frame_seq
	# ("replay: authentic, but frame_seq is not previous + 1"), so this counts as replay too.
	hc_hostile skip replay closes
	hc_valid 2
	hc_hostile wrong_key wrong_key closes   # HELLO for A, tagged with A's key under another master
	hc_valid 2
	hc bind_b                               # B bound (HELLO only): its key id is now known
	# HELLO for A tagged with B's (real) key: told apart by the key id (docs/protocol.md, HELLO).
	hc_hostile other_key other_sandbox_key closes
	hc_valid 2
	hc_hostile tampered bad_tag closes      # A's key and key id, one payload byte changed after tagging
	hc_valid 2
	hc_hostile other_sandbox other_sandbox  # a valid line of sandbox B on A's authenticated connection
	hc_valid 2
	hc_hostile bad_line bad_line            # the next line of A, one body byte changed after hashing
	hc_valid 2
	hc_hostile out_of_order out_of_order    # seq head+2, head+3: head+1 is missing
	hc_valid 2
	hc_hostile duplicate duplicate          # the last 3 stored lines, resent byte for byte
	hc_valid 3 end                          # ... and the record ends

	hc_alive "at the end"
	# Every valid line stored exactly once, in order, and nothing else for A; nothing at all for B.
	local sid_a sid_b
	sid_a=$(jq -r .sid_a "$SL_TMP/state.json")
	sid_b=$(jq -r .sid_b "$SL_TMP/state.json")
	hc expected >/dev/null
	printf '%s\n' "$HC_OUT" >"$SL_TMP/expected"
	"$SL_BIN" events --db "$HC_DB" --sandbox "$sid_a" >"$SL_TMP/stored"
	cmp "$SL_TMP/stored" "$SL_TMP/expected" ||
		fail "stored lines differ from the valid lines sent ($(wc -l <"$SL_TMP/stored") stored, $(wc -l <"$SL_TMP/expected") sent): $(diff "$SL_TMP/expected" "$SL_TMP/stored" | head -n 10)"
	assert_eq "$(wc -l <"$SL_TMP/expected")" 30 "valid lines sent"
	"$SL_BIN" verify "$SL_TMP/stored" >/dev/null || fail "the stored copy does not verify: $("$SL_BIN" verify "$SL_TMP/stored")"
	assert_eq "$("$SL_BIN" events --db "$HC_DB" --sandbox "$sid_b" | wc -l)" 0 "lines stored for sandbox B"
	assert_eq "$("$SL_BIN" events --db "$HC_DB" --json | jq -r .sandbox_id | awk -v a="$sid_a" '$0 != a' | wc -l)" 0 "events of other sandboxes"
	# The exact counts, per reason, and no other reason.
	assert_eq "$(hc_rejects)" \
		"bad_line=1 bad_magic=1 bad_tag=1 duplicate=1 other_sandbox=1 other_sandbox_key=1 out_of_order=1 oversize=1 replay=2 truncated_body=1 wrong_key=1" \
		"rejects table"
	echo "rejects: $(hc_rejects)"
	# Drops reported by sensors: the valid sessions' heartbeats say dropped=5 (B sent none).
	python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$mport/metrics').read().decode())" >"$SL_TMP/metrics"
	grep -q '^sightline_sensor_dropped_total 5$' "$SL_TMP/metrics" || fail "sensor drops: $(grep dropped "$SL_TMP/metrics")"
	grep -q '^sightline_frames_rejected_total{reason="other_sandbox_key"} 1$' "$SL_TMP/metrics" || fail "other_sandbox_key in /metrics"
	# After a restart the collector still knows B's key id (from B's stored binding).
	hostile_collector_stop
	hostile_collector_start --metrics tcp:127.0.0.1:$mport
	hc_hostile other_key other_sandbox_key closes
	if [ ${#HC_VIOLATIONS[@]} -gt 0 ]; then
		printf '%s\n' "${HC_VIOLATIONS[@]}" >&2
		fail "${#HC_VIOLATIONS[@]} promise(s) of docs/protocol.md broken (see above)"
	fi
}

# No local user can stall the collector: ingest connections that never complete a HELLO are closed
# after the handshake deadline (counted handshake_timeout), at most 64 may wait at once (a new one
# evicts the oldest waiting one, counted too_many_unauthenticated, so a flood cannot lock a
# supervisor out), operator and metrics connections that send nothing block neither a valid
# session nor the gate (metrics has its own cap of 32, the extra ones counted), and are closed
# after their 2 s deadline, so a scrape then works; the latency histogram has 4 buckets per octave.
test_collector_stall_resistance() {
	command -v python3 >/dev/null || skip "needs python3"
	command -v sqlite3 >/dev/null || skip "needs the sqlite3 command"
	command -v curl >/dev/null || skip "needs curl"
	HC_PY=$(python3 -c 'import sys; print(sys.executable)')
	HC_SOCK=$SL_TMP/stall.sock HC_DB=$SL_TMP/stall.db HC_SECRET=$SL_TMP/stall.secret
	(umask 077 && head -c 32 /dev/urandom >"$HC_SECRET")
	local port
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	collectd_bg "$HC_SOCK" "$HC_DB" "$HC_SECRET" --admin "unix:$SL_TMP/stall.admin" --metrics "tcp:127.0.0.1:$port"
	HC_PID=$BG_PID
	trap 'kill "$HC_PID" 2>/dev/null || true; wait "$HC_PID" 2>/dev/null || true; kill "$HOLD_PID" 2>/dev/null || true; rm -rf "$SL_TMP"' EXIT
	# 70 silent ingest connections, 40 silent metrics and 20 silent operator connections, held
	# until $SL_TMP/held.release exists (at most 30 s).
	"$HC_PY" - "$HC_SOCK" "$port" "$SL_TMP/stall.admin" "$SL_TMP/held" <<'PY' &
import os, socket, sys, time
ing, port, adm, flag = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
held = []
for _ in range(70):
    s = socket.socket(socket.AF_UNIX); s.connect(ing); held.append(s)
for _ in range(40):
    s = socket.socket(); s.connect(("127.0.0.1", port)); s.send(b"GET /met"); held.append(s)
for _ in range(20):
    s = socket.socket(socket.AF_UNIX); s.connect(adm); s.send(b"GA"); held.append(s)
open(flag, "w").close()
for _ in range(300):
    if os.path.exists(flag + ".release"):
        break
    time.sleep(0.1)
PY
	HOLD_PID=$!
	for _ in $(seq 1 100); do [ -e "$SL_TMP/held" ] && break; sleep 0.05; done
	[ -e "$SL_TMP/held" ] || fail "the holder did not connect"
	# With all of that open, a valid session and a gate query are served.
	"$HC_PY" "$SL_ROOT/tests/hostile_client.py" "$HC_SOCK" "$HC_SECRET" "$SL_TMP/state.json" init >/dev/null
	"$HC_PY" "$SL_ROOT/tests/hostile_client.py" "$HC_SOCK" "$HC_SECRET" "$SL_TMP/state.json" valid 3 >"$SL_TMP/valid.json" ||
		fail "valid session while stalled connections are open: $(cat "$SL_TMP/valid.json")"
	local gate
	gate=$(python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1]); s.send(b"GATE low\n"); print(s.recv(100).decode().strip())' "$SL_TMP/stall.admin")
	assert_eq "$gate" "open" "gate answer"
	# The held metrics connections are closed at their 2 s deadline (still held by the client): a
	# scrape then works.
	sleep 2.5
	curl -sf --max-time 5 "http://127.0.0.1:$port/metrics" >"$SL_TMP/metrics" || fail "no /metrics after the held connections' deadline"
	assert_eq "$(sqlite3 "$HC_DB" "SELECT count FROM rejects WHERE reason='too_many_metrics_connections'")" 8 "too_many_metrics_connections rejects"
	# 4 sub-buckets per power of two: consecutive bounds from 8 us on differ by at most 25 %.
	python3 - "$SL_TMP/metrics" <<'PY' || fail "latency buckets too coarse: $(grep -c latency_seconds_bucket "$SL_TMP/metrics") buckets"
import re, sys
les = [float(m) for m in re.findall(r'latency_seconds_bucket\{le="([0-9.]+)"\}', open(sys.argv[1]).read())]
big = [x for x in les if x >= 8e-6]
assert len(big) > 80 and all(b / a <= 1.25 + 1e-9 for a, b in zip(big, big[1:])) and les == sorted(les), les
PY
	grep -q '^sightline_events_received_total 3$' "$SL_TMP/metrics" || fail "metrics: $(grep events_received "$SL_TMP/metrics")"
	# The 6 silent connections beyond the cap, and the one the valid session's arrival pushed out,
	# were evicted at once; after the handshake deadline (3 s) the other 63 are closed and counted.
	local i
	for i in $(seq 1 100); do
		[ "$(sqlite3 "$HC_DB" "SELECT count FROM rejects WHERE reason='handshake_timeout'")" = 63 ] && break
		sleep 0.1
	done
	assert_eq "$(sqlite3 "$HC_DB" "SELECT count FROM rejects WHERE reason='handshake_timeout'")" 63 "handshake_timeout rejects"
	assert_eq "$(sqlite3 "$HC_DB" "SELECT count FROM rejects WHERE reason='too_many_unauthenticated'")" 7 "too_many_unauthenticated rejects"
	touch "$SL_TMP/held.release"
	wait "$HOLD_PID" || fail "the holder failed"
	kill -0 "$HC_PID" || fail "the collector died"
}

# An idle, healthy connection hears from the collector several times a second (keep-alive ACKs of
# the stored head), not only once per heartbeat: a supervisor's --max-blind-ms under 1.1 s holds.
test_collector_keepalive_ack() {
	command -v python3 >/dev/null || skip "needs python3"
	HC_PY=$(python3 -c 'import sys; print(sys.executable)')
	HC_SOCK=$SL_TMP/ka.sock HC_DB=$SL_TMP/ka.db HC_SECRET=$SL_TMP/ka.secret
	(umask 077 && head -c 32 /dev/urandom >"$HC_SECRET")
	collectd_bg "$HC_SOCK" "$HC_DB" "$HC_SECRET"
	HC_PID=$BG_PID
	trap 'kill "$HC_PID" 2>/dev/null || true; wait "$HC_PID" 2>/dev/null || true; rm -rf "$SL_TMP"' EXIT
	"$HC_PY" "$SL_ROOT/tests/hostile_client.py" "$HC_SOCK" "$HC_SECRET" "$SL_TMP/state.json" init >/dev/null
	"$HC_PY" "$SL_ROOT/tests/hostile_client.py" "$HC_SOCK" "$HC_SECRET" "$SL_TMP/state.json" idle 2 >"$SL_TMP/idle.json" ||
		fail "idle session: $(cat "$SL_TMP/idle.json")"
	echo "idle: $(cat "$SL_TMP/idle.json")"
	# 2 s idle after the HELLO's ACK: keep-alives every 250 ms (on a 100 ms tick) give >= 5, and
	# every gap below 700 ms; each is the stored head.
	jq -e '.acks >= 5 and .max_gap_ms < 700 and .all_head' "$SL_TMP/idle.json" >/dev/null ||
		fail "keep-alive ACKs: $(cat "$SL_TMP/idle.json")"
}

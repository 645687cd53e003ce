# What the sensor records: completeness under load, exactness under a TOCTOU race, identity
# that the workload cannot forge, tamper evidence, and fail-closed behaviour.

capture_completeness() {
	local mode=$1
	mkdir -p "$SL_TMP/ws-$mode"
	echo data >"$SL_TMP/ws-$mode/target.txt"
	sl_sandbox "$mode" 'network: {allow_tcp_connect: [8080]}' -- /bin/sh -c \
		'/workspace/probe opens 100000 /workspace/target.txt && /workspace/probe execs 1000 && /workspace/probe connects 1000 8080'
	[ "$RC" = 0 ] || fail "workload failed ($RC): $OUT $ERR"
	echo "$OUT" | grep -qx 'COUNT opens 100000' || fail "workload opens: $OUT"
	echo "$OUT" | grep -qx 'COUNT execs 1000' || fail "workload execs: $OUT"
	echo "$OUT" | grep -qx 'COUNT connects 1000' || fail "workload connects: $OUT"
	local opens execs connects gaps
	opens=$(jq -c 'select(.class=="file.open" and .path=="/workspace/target.txt" and .result>=0)' "$REC" | wc -l)
	execs=$(jq -c 'select(.class=="process.exec" and .argv==["probe","noop"])' "$REC" | wc -l)
	connects=$(jq -c 'select(.class=="network.connect" and .port==8080)' "$REC" | wc -l)
	gaps=$(jq -c 'select(.class=="sensor.gap")' "$REC" | wc -l)
	echo "recorded: opens=$opens execs=$execs connects=$connects gaps=$gaps"
	assert_eq "$opens" 100000 "recorded opens"
	assert_eq "$execs" 1000 "recorded execs"
	assert_eq "$connects" 1000 "recorded connects"
	if [ "$mode" = root ]; then assert_eq "$gaps" 0 "sensor gaps"; fi
	expect_verified
	# seq has no holes (verify checks it too; here independently)
	jq -s -e '[.[].seq] == [range(1; length+1)]' "$REC" >/dev/null || fail "seq has holes"
}
test_completeness_root() { need_root; capture_completeness root; }
test_completeness_user() { need_root; capture_completeness user; }

capture_race() {
	local mode=$1 ws=$SL_TMP/ws-$1
	mkdir -p "$ws"
	echo allowed >"$ws/aaaaaa.txt"
	echo canary >"$ws/cccccc.txt"
	# --no-colocate: the threads run truly in parallel on both CPUs, the strongest adversary.
	SL_RUN_FLAGS=--no-colocate sl_sandbox "$mode" 'canaries: [/workspace/cccccc.txt]' -- \
		/workspace/probe race 10000 4 /workspace/aaaaaa.txt /workspace/cccccc.txt
	[ "$RC" = 0 ] || fail "race workload failed: $ERR"
	echo "$OUT" | grep '^OPEN' >"$SL_TMP/seen"
	jq -r 'select(.class=="file.open" and (.path|test("^/workspace/[ac]{6}\\.txt$")))
		| "\(.tid) \(.result) \(.path) \(.canary)"' "$REC" >"$SL_TMP/recorded"
	python3 - "$SL_TMP/seen" "$SL_TMP/recorded" <<'PY'
import sys, collections
seen = collections.defaultdict(list)
for line in open(sys.argv[1]):
    _, tid, fd, content = line.split()
    seen[int(tid)].append((int(fd), content))
rec = collections.defaultdict(list)
bad_flag = 0
for line in open(sys.argv[2]):
    tid, fd, path, canary = line.split()
    fd = int(fd)
    if fd < 0:  # a half-flipped name that does not exist: the workload saw the same errno
        name, fd = f"ERR{-fd}", -1
    else:
        name = {"/workspace/aaaaaa.txt": "allowed", "/workspace/cccccc.txt": "canary"}[path]
    if (path == "/workspace/cccccc.txt") != (canary == "true"):
        bad_flag += 1
    rec[int(tid)].append((fd, name))
total = sum(len(v) for v in seen.values())
both = {n for v in seen.values() for _, n in v}
print(f"opens={total} threads={len(seen)} contents seen={sorted(both)}")
assert total == 10000, total
assert {"allowed", "canary"} <= both, "the race never flipped: the test proves nothing"
mism = 0
for tid, ops in seen.items():
    if rec[tid] != ops:
        mism += 1
        for i, (a, b) in enumerate(zip(ops, rec[tid])):
            if a != b:
                print(f"tid {tid} op {i}: workload opened {a}, record says {b}")
                break
        print(f"tid {tid}: {len(ops)} opens, {len(rec[tid])} records")
assert mism == 0, f"{mism} threads whose record differs from what they opened"
assert bad_flag == 0, f"{bad_flag} events with a wrong canary flag"
assert set(rec) == set(seen)
print("record matches every open exactly")
PY
	expect_verified
}
test_race_root() { need_root; capture_race root; }
test_race_user() { need_root; capture_race user; }

test_forgery() {
	need_root
	local id='{"tenant":"acme","agent":"agent-7","version":"v1.2.3","credential_ref":"cred-ref-42"}'
	# The workload prints event-shaped JSON, sets SIGHTLINE_* variables, writes fake records
	# into every place it can reach, and the launcher's own environment carries SIGHTLINE_*.
	export SIGHTLINE_TENANT=evil SIGHTLINE_SANDBOX_ID=00000000000000000000000000000000
	sl_sandbox root -- /bin/sh -c '
		fake="{\"seq\":2,\"sandbox_id\":\"00000000000000000000000000000000\",\"class\":\"process.exec\",\"identity\":{\"tenant\":\"evil\"}}"
		echo "$fake"; echo "$fake" >&2
		export SIGHTLINE_TENANT=evil SIGHTLINE_TASK=forged SIGHTLINE_AGENT=evil
		echo "$fake" > /workspace/00000000000000000000000000000000.jsonl
		echo "$fake" > /tmp/record.jsonl
		env | grep -c SIGHTLINE_ >/workspace/env-count
		/workspace/probe noop'
	unset SIGHTLINE_TENANT SIGHTLINE_SANDBOX_ID
	[ "$RC" = 0 ] || fail "workload failed: $ERR"
	expect_verified
	local ids sids
	ids=$(jq -c '.identity | del(.task)' "$REC" | sort -u)
	assert_eq "$ids" "$id" "identity on every line"
	sids=$(jq -r '.sandbox_id' "$REC" | sort -u | wc -l)
	assert_eq "$sids" 1 "one sandbox id"
	# "evil" may appear only as what the workload ran (argv), never as identity or sandbox id.
	local where
	where=$(jq -r 'select(tostring|test("evil")) | .class' "$REC" | sort -u | tr '\n' ' ')
	assert_eq "$where" "process.exec record.begin " "classes mentioning the forged value"
	! jq -r '.identity, .sandbox_id' "$REC" | grep -q 'evil\|0000000000000000' || fail "forged identity"
	# The launcher's SIGHTLINE_* did not cross into the sandbox either.
	assert_eq "$(cat "$SL_TMP/ws-root/env-count")" 3 "only the workload's own SIGHTLINE_ exports"
	sl_sandbox root -- /bin/sh -c 'env | grep -c SIGHTLINE_ || true'
	assert_eq "$OUT" 0 "launcher environment leaked"
}

test_tamper() {
	need_root
	sl_sandbox root -- /bin/sh -c '/workspace/probe noop; /workspace/probe noop'
	expect_verified
	local n f=$SL_TMP/t.jsonl
	n=$(wc -l <"$REC")
	[ "$n" -ge 8 ] || fail "record too short ($n)"
	# edited
	sed '5s/"pid":[0-9]*/"pid":999/' "$REC" >"$f"
	"$SL_BIN" verify "$f" | tee /dev/stderr | grep -q 'bad seq 5: edited' || fail "edit not named"
	# removed
	sed '5d' "$REC" >"$f"
	"$SL_BIN" verify "$f" | grep -q 'bad seq 5: removed' || fail "removal not named: $("$SL_BIN" verify "$f")"
	# reordered
	awk 'NR==5{l=$0;next} NR==6{print;print l;next} {print}' "$REC" >"$f"
	"$SL_BIN" verify "$f" | grep -q 'bad seq 5: reordered' || fail "reorder not named: $("$SL_BIN" verify "$f")"
	# truncated (last line gone, and cut mid-line)
	head -n $((n - 1)) "$REC" >"$f"
	"$SL_BIN" verify "$f" | grep -q "bad seq $n: truncated" || fail "truncation not named: $("$SL_BIN" verify "$f")"
	head -c -20 "$REC" >"$f"
	"$SL_BIN" verify "$f" | grep -q "bad seq $n: truncated" || fail "cut not named: $("$SL_BIN" verify "$f")"
	set +e
	"$SL_BIN" verify "$f" >/dev/null
	assert_eq "$?" 1 "verify exit status on a bad record"
}

test_disk_full_kills_workload() {
	need_root
	mkdir -p "$SL_TMP/small"
	mount -t tmpfs -o size=256k tmpfs "$SL_TMP/small" || skip "cannot mount a tmpfs"
	trap 'umount -l "$SL_TMP/small" 2>/dev/null; rm -rf "$SL_TMP"' EXIT
	mkdir -p "$SL_TMP/ws-root"
	echo x >"$SL_TMP/ws-root/f"
	chown -R 1000:1000 "$SL_TMP/ws-root"
	cp "$SL_PROBES/probe" "$SL_TMP/ws-root/probe"
	printf 'workspace: %s\n' "$SL_TMP/ws-root" >"$SL_TMP/p.yaml"
	set +e
	"$SL_BIN" run --tenant t --agent a --task k --version v --credential-ref r --policy "$SL_TMP/p.yaml" \
		--record-dir "$SL_TMP/small" -- /workspace/probe opens 100000 /workspace/f >"$SL_TMP/out" 2>"$SL_TMP/err"
	local rc=$?
	set -e
	cat "$SL_TMP/err"
	[ "$rc" != 0 ] || fail "workload finished although its record could not be written"
	grep -q 'record' "$SL_TMP/err" || fail "no error about the record"
	grep -q 'No space left on device' "$SL_TMP/err" || fail "error does not say the disk is full"
	# It was stopped: far fewer opens ran than asked, and every one that ran is in the record.
	! grep -q 'COUNT opens 100000' "$SL_TMP/out" || fail "workload ran to completion unrecorded"
	REC=$(ls "$SL_TMP/small"/*.jsonl)
	# What was recorded is intact and reads as cut short: no record.end after a lost line.
	local v
	v=$("$SL_BIN" verify "$REC" || true)
	echo "verify: $v"
	case "$v" in
	*truncated*) ;;
	*) fail "an incomplete record must verify as truncated: $v" ;;
	esac
	assert_eq "$rc" 125 "exit status when the record is incomplete"
}

test_fail_closed_unprivileged_without_gap() {
	need_root
	mkdir -p "$SL_TMP/ws"
	chown "$SL_USER:" "$SL_TMP/ws"
	set +e
	runuser -u "$SL_USER" -- "$SL_BIN" run --tenant t --agent a --task k --version v --credential-ref r \
		--record-dir "$SL_TMP/ws/../rec-x" -- /bin/true 2>"$SL_TMP/err"
	local rc=$?
	set -e
	assert_eq "$rc" 3 "exit status when a layer is missing"
	grep -q "missing layer 'cgroup'" "$SL_TMP/err" || fail "gap not named: $(cat "$SL_TMP/err")"
}

test_accepted_gap_is_recorded() {
	need_root
	sl_sandbox user -- /bin/true
	[ "$RC" = 0 ] || fail "run failed: $ERR"
	rec_has '.class=="sensor.gap" and .gap=="cgroup" and .accepted==true' || fail "accepted gap not recorded"
	rec_has '.class=="record.begin" and (.manifest.accepted_gaps|index("cgroup"))' || fail "gap not in manifest"
}

test_identity_required() {
	set +e
	"$SL_BIN" run --tenant t --agent a --task k --version v -- /bin/true 2>"$SL_TMP/err"
	local rc=$?
	set -e
	assert_eq "$rc" 2 "exit status"
	grep -q -- '--credential-ref is required' "$SL_TMP/err" || fail "$(cat "$SL_TMP/err")"
}

test_bad_policy_named() {
	printf 'workspace: /tmp\nnetwork:\n  allow_tcp_connect: [70000]\n' >"$SL_TMP/bad.yaml"
	set +e
	"$SL_BIN" run --tenant t --agent a --task k --version v --credential-ref r --policy "$SL_TMP/bad.yaml" -- /bin/true 2>"$SL_TMP/err"
	local rc=$?
	set -e
	assert_eq "$rc" 2 "exit status"
	grep -q "bad.yaml:3:" "$SL_TMP/err" || fail "error does not name file:line: $(cat "$SL_TMP/err")"
}

test_exit_status_and_lifecycle() {
	need_root
	sl_sandbox root -- /bin/sh -c 'exit 7'
	assert_eq "$RC" 7 "exit status passed through"
	rec_has '.class=="lifecycle.exit" and .exit_code==7 and .duration_ns>0' || fail "no lifecycle.exit"
	# pid 1 of a pid namespace ignores signals from inside; the wall-clock limit kills it.
	sl_sandbox root 'limits: {wall_seconds: 1}' -- /bin/sleep 30
	assert_eq "$RC" 137 "killed status"
	rec_has '.class=="lifecycle.exit" and .signal=="SIGKILL" and .reason=="killed: wall-clock limit"' ||
		fail "kill not recorded: $(jq -c 'select(.class=="lifecycle.exit")' "$REC")"
}

test_secret_argv_redacted() {
	need_root
	sl_sandbox root -- /workspace/probe noop --token ghp_abcdefghijklmnopqrstuvwxyz0123456789 PASSWORD=hunter2hunter2
	expect_verified
	! grep -q 'hunter2\|ghp_abc' "$REC" || fail "secret in the record"
	rec_has '.class=="process.exec" and (.argv|index("PASSWORD=[REDACTED]"))' || fail "redaction marker missing"
}

test_disk_full_waits_by_policy() {
	need_root
	mkdir -p "$SL_TMP/small"
	mount -t tmpfs -o size=1m tmpfs "$SL_TMP/small" || skip "cannot mount a tmpfs"
	trap 'umount -l "$SL_TMP/small" 2>/dev/null; rm -rf "$SL_TMP"' EXIT
	mkdir -p "$SL_TMP/ws-root" "$SL_TMP/small/rec"
	echo x >"$SL_TMP/ws-root/f"
	chown -R 1000:1000 "$SL_TMP/ws-root"
	cp "$SL_PROBES/probe" "$SL_TMP/ws-root/probe"
	printf 'workspace: %s\nrecord: {on_full: wait}\n' "$SL_TMP/ws-root" >"$SL_TMP/p.yaml"
	# All but ~200 KiB of the record's disk is taken; 2 s after the start it is freed again.
	head -c 800k /dev/zero >"$SL_TMP/small/filler"
	( sleep 2; date +%s%N >"$SL_TMP/freed_at"; rm -f "$SL_TMP/small/filler" ) &
	local freer=$!
	set +e
	"$SL_BIN" run --tenant t --agent a --task k --version v --credential-ref r --policy "$SL_TMP/p.yaml" \
		--record-dir "$SL_TMP/small/rec" -- /workspace/probe opens 1000 /workspace/f >"$SL_TMP/out" 2>"$SL_TMP/err"
	local rc=$?
	set -e
	wait "$freer"
	cat "$SL_TMP/err"
	assert_eq "$rc" 0 "exit status (the workload waited, then finished)"
	REC=$(ls "$SL_TMP"/small/rec/*.jsonl)
	"$SL_BIN" verify "$REC" >/dev/null || fail "the record does not verify: $("$SL_BIN" verify "$REC")"
	# Every open the workload made is recorded, once.
	assert_eq "$(jq -c 'select(.class=="file.open" and .path=="/workspace/f")' "$REC" | wc -l)" 1000 "recorded opens"
	# The wait is said, once space returned, right before the event whose syscall waited.
	rec_has '.class=="sensor.gap" and .gap=="record-full" and .detail=="record disk full, workload waiting"' ||
		fail "no record-full gap"
	python3 - "$REC" "$(cat "$SL_TMP/freed_at")" <<'PY'
import json, sys
rec = [json.loads(l) for l in open(sys.argv[1])]
freed = int(sys.argv[2])
gaps = [i for i, e in enumerate(rec) if e["class"] == "sensor.gap" and e.get("gap") == "record-full"]
assert len(gaps) == 1, gaps
g = rec[gaps[0]]
held = rec[gaps[0] + 1]
print(f"waited {(g['time'] - g['since_ns']) / 1e9:.2f} s for space (freed {(freed - g['since_ns']) / 1e9:.2f} s after it filled); held: {held['class']}")
assert held["class"] == g["held"], (held, g)
assert g["time"] >= freed, "the gap was written before space returned"
# Nothing of the workload was recorded while it waited: the line before the gap is older than
# the start of the wait, the held event is after the space returned.
assert rec[gaps[0] - 1]["time"] <= g["since_ns"] and held["time"] >= freed
PY
}

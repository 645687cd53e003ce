# Shared helpers for integration tests (sourced; tests run under set -eu).
skip() { echo "skip: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
need_root() { [ "$(id -u)" = 0 ] || skip "needs root"; }
# Fresh scratch dir per test, removed on exit.
SL_TMP=$(mktemp -d /tmp/sltest.XXXXXX)
chmod 755 "$SL_TMP"
trap 'rm -rf "$SL_TMP" 2>/dev/null || true' EXIT
# The unprivileged user the tests run sandboxes as (created by scripts/setup.sh).
SL_USER=${SL_USER:-sightline-test}
assert_eq() { [ "$1" = "$2" ] || fail "${3:-values differ}: expected '$2', got '$1'"; }
# jq over a record file: rec_q FILE FILTER
rec_q() { jq -c "$2" "$1"; }

# Run a command in a sightline sandbox.
#   sl_sandbox MODE [POLICY_EXTRA_YAML] -- CMD...
# MODE: root | user (the unprivileged $SL_USER). The workspace is $SL_TMP/ws-MODE (the probe is
# copied there as /workspace/probe); records go to $SL_TMP/rec-MODE. Sets REC (the record file),
# RC (exit status), OUT (stdout) and ERR (stderr). Never fails by itself. Extra `run` flags
# may be given in SL_RUN_FLAGS.
sl_sandbox() {
	local mode=$1
	shift
	local extra=""
	if [ "$1" != "--" ]; then
		extra=$1
		shift
	fi
	shift # --
	local ws=$SL_TMP/ws-$mode rec=$SL_TMP/rec-$mode
	mkdir -p "$ws" "$rec"
	cp "$SL_PROBES/probe" "$ws/probe"
	local gaps=()
	if [ "$mode" = user ]; then
		chown -R "$SL_USER:" "$ws" "$rec"
		gaps=(--accept-gap cgroup --accept-gap cgroup-memory --accept-gap cgroup-pids)
	else
		chown -R 1000:1000 "$ws"
	fi
	local pol=$SL_TMP/policy-$mode-$RANDOM.yaml
	printf 'workspace: %s\n%s\n' "$ws" "$extra" >"$pol"
	chmod 644 "$pol"
	local cmd=("$SL_BIN" run --tenant acme --agent agent-7 --task "task-$RANDOM" --version v1.2.3
		--credential-ref cred-ref-42 --policy "$pol" --record-dir "$rec" --quiet "${gaps[@]}" ${SL_RUN_FLAGS:-} -- "$@")
	set +e
	if [ "$mode" = user ]; then
		runuser -u "$SL_USER" -- "${cmd[@]}" >"$SL_TMP/out" 2>"$SL_TMP/err"
	else
		"${cmd[@]}" >"$SL_TMP/out" 2>"$SL_TMP/err"
	fi
	RC=$?
	set -e
	OUT=$(cat "$SL_TMP/out")
	ERR=$(cat "$SL_TMP/err")
	REC=$(ls -t "$rec"/*.jsonl 2>/dev/null | head -n 1)
	return 0
}

# Assert the record has a policy.deny with these fields: expect_deny LAYER SYSCALL ERRNO
# rec_has JQ_CONDITION: some line of $REC satisfies it. (jq 1.6's -e looks only at the last input.)
rec_has() { [ -n "$(jq -c "select($1)" "$REC")" ]; }
expect_deny() {
	rec_has ".class==\"policy.deny\" and .layer==\"$1\" and .syscall==\"$2\" and .errno==\"$3\"" ||
		fail "no policy.deny layer=$1 syscall=$2 errno=$3 in $REC: $(jq -c 'select(.class=="policy.deny")' "$REC")"
}
expect_result() { # ACTION ERRNO_NAME|OK EXPECTED_EXIT
	echo "$OUT" | grep -qx "RESULT $1 $2" || fail "expected 'RESULT $1 $2', got: $OUT / $ERR"
	[ "$RC" = "$3" ] || fail "exit status $RC, expected $3"
}
expect_verified() {
	"$SL_BIN" verify "$REC" >/dev/null || fail "record does not verify: $("$SL_BIN" verify "$REC")"
}

# Start `sightline collectd` in the background and wait until it serves:
#   collectd_bg SOCK DB SECRET [ARGS...]   (sets BG_PID; the log goes to $SL_TMP/collectd.log)
collectd_bg() {
	local sock=$1 db=$2 secret=$3
	shift 3
	# Never the default operator socket under /run: tests of two runs must not share it.
	local admin=()
	[[ " $* " == *" --admin "* ]] || admin=(--admin "unix:$sock.admin")
	"$SL_BIN" collectd --listen "unix:$sock" --db "$db" --secret "$secret" "${admin[@]}" "$@" >>"$SL_TMP/collectd.log" 2>&1 &
	BG_PID=$!
	for _ in $(seq 1 100); do
		[ -S "$sock" ] && grep -q 'collector ready' "$SL_TMP/collectd.log" 2>/dev/null && return 0
		sleep 0.05
	done
	cat "$SL_TMP/collectd.log"
	fail "collector did not start"
}

# A free TCP port on the loopback (the kernel picks it): tests never share a fixed port, so two
# runs on one machine, or a leftover listener, cannot make a test fail for the wrong reason.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

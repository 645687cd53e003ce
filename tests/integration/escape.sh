# Break-out attempts from inside the native sandbox, each asserting the exact errno the workload
# sees and the event the supervisor records. Every case runs as root and as an unprivileged user.

esc_host_read() {
	sl_sandbox "$1" -- /workspace/probe read /var/lib/dpkg/status
	expect_result read EACCES 13
	expect_deny supervisor openat EACCES
	rec_has '.class=="policy.deny" and .path=="/var/lib/dpkg/status"' || fail "deny lacks the path"
}
esc_write_outside() {
	sl_sandbox "$1" -- /workspace/probe write /etc/sightline-escape
	expect_result write EACCES 13
	expect_deny supervisor openat EACCES
	[ ! -e /etc/sightline-escape ] || fail "file created on the host"
}
esc_symlink_write() {
	# A symlink inside the workspace that points at a host system file: the name passes the
	# workspace check, the kernel (read-only view) refuses the write, the record says so.
	ln -sf /etc/passwd "$SL_TMP/ws-$1/link" 2>/dev/null || { mkdir -p "$SL_TMP/ws-$1"; ln -sf /etc/passwd "$SL_TMP/ws-$1/link"; }
	local before
	before=$(sha256sum /etc/passwd)
	sl_sandbox "$1" -- /workspace/probe write /workspace/link
	expect_result write EROFS 30
	expect_deny kernel openat EROFS
	[ "$(sha256sum /etc/passwd)" = "$before" ] || fail "host /etc/passwd changed"
}
esc_connect() {
	sl_sandbox "$1" 'network: {allow_tcp_connect: [8080]}' -- /workspace/probe connect 9
	expect_result connect EACCES 13
	expect_deny supervisor connect EACCES
	rec_has '.class=="network.connect" and .port==9 and .errno=="EACCES"' || fail "no connect event"
}
esc_ptrace_supervisor() {
	# $$ of the shell that execs sightline is the supervisor's pid.
	local mode=$1
	sl_sandbox "$mode" -- /workspace/probe ptrace "$$"
	expect_result ptrace EPERM 1
	expect_deny seccomp ptrace EPERM
}
esc_signal_supervisor() {
	# The supervisor's host pid does not exist in the sandbox's pid namespace: ESRCH, and the
	# supervisor lives on to write the end of the record.
	local sup
	sup=$$
	sl_sandbox "$1" -- /workspace/probe kill "$sup"
	expect_result kill ESRCH 3
	sl_sandbox "$1" -- /workspace/probe kill-all
	rec_has '.class=="record.end"' || fail "supervisor did not finish the record"
	expect_verified
}
esc_see_host_processes() {
	sl_sandbox "$1" -- /workspace/probe listproc
	expect_result listproc OK 0
	local pids
	pids=$(echo "$OUT" | awk '/^PID/{print $2}' | tr '\n' ' ')
	[ "$pids" = "1 " ] || fail "sandbox sees processes: $pids"
	sl_sandbox "$1" -- /workspace/probe read "/proc/$$/status"
	expect_result read ENOENT 2
}
esc_mount() {
	sl_sandbox "$1" -- /workspace/probe mount
	expect_result mount EPERM 1
	expect_deny seccomp mount EPERM
}
esc_io_uring() {
	sl_sandbox "$1" -- /workspace/probe io_uring
	expect_result io_uring EPERM 1
	expect_deny seccomp io_uring_setup EPERM
}
esc_userns() {
	sl_sandbox "$1" -- /workspace/probe userns
	expect_result userns EPERM 1
	expect_deny seccomp unshare EPERM
	sl_sandbox "$1" -- /workspace/probe clone-userns
	expect_result clone-userns EPERM 1
	expect_deny seccomp clone EPERM
}
esc_bpf() {
	sl_sandbox "$1" -- /workspace/probe bpf
	expect_result bpf EPERM 1
	expect_deny seccomp bpf EPERM
}
esc_setns() {
	sl_sandbox "$1" -- /workspace/probe setns
	expect_result setns EPERM 1
	expect_deny seccomp setns EPERM
}
esc_tiocsti() {
	sl_sandbox "$1" -- /workspace/probe tiocsti
	expect_result tiocsti EPERM 1
	expect_deny seccomp ioctl EPERM
}

esc_kernel_addresses() {
	# The sensor opens files for the workload; the file must not carry the sensor's privilege.
	sl_sandbox "$1" -- /workspace/probe read /proc/kallsyms
	expect_result read OK 0
	echo "$OUT" | grep -q '^CONTENT 0000000000000000 ' || fail "kernel addresses visible: $(echo "$OUT" | head -2)"
}
esc_dev_tty() {
	# /dev/tty opened by the supervisor would be the operator's terminal.
	sl_sandbox "$1" -- /workspace/probe write /dev/tty
	expect_result write ENXIO 6
}
esc_fastopen() {
	sl_sandbox "$1" 'network: {allow_tcp_connect: [8080]}' -- /workspace/probe fastopen 9
	expect_result fastopen EPERM 1
	expect_deny seccomp sendto EPERM
}
esc_signal_mask() {
	sl_sandbox "$1" -- /workspace/probe sigmask
	echo "$OUT" | grep -qx 'BLOCKED 0' || fail "workload starts with blocked signals: $OUT"
}
esc_exec_mismatch() {
	# An exec the sensor let through but the kernel refused (not an executable format) must not
	# stand in the record as if it ran.
	mkdir -p "$SL_TMP/ws-$1"
	printf 'not an executable\n' >"$SL_TMP/ws-$1/garbage"
	chmod 755 "$SL_TMP/ws-$1/garbage"
	sl_sandbox "$1" -- /workspace/probe exec /workspace/garbage
	expect_result exec ENOEXEC 8
	rec_has '.class=="sensor.gap" and .gap=="exec-mismatch" and .expected=="/workspace/garbage"' ||
		fail "no exec-mismatch: $(jq -c 'select(.class=="process.exec" or .class=="sensor.gap")' "$REC")"
}
esc_fifo() {
	# A FIFO open waits for its other end; the sensor must keep serving the other side.
	sl_sandbox "$1" 'limits: {wall_seconds: 20}' -- /bin/sh -c 'mkfifo /workspace/p && { cat /workspace/p > /workspace/got & } ; echo through-the-fifo > /workspace/p; wait; cat /workspace/got'
	[ "$RC" = 0 ] || fail "fifo workload failed ($RC): $OUT $ERR"
	echo "$OUT" | grep -qx through-the-fifo || fail "fifo data lost: $OUT"
	[ "$(jq -c 'select(.class=="file.open" and .path=="/workspace/p" and .result>=0)' "$REC" | wc -l)" = 2 ] ||
		fail "both fifo opens not recorded"
}

esc_script_exec_verified() {
	# A "#!" script runs its interpreter: the post-exec check must accept that, not cry mismatch.
	mkdir -p "$SL_TMP/ws-$1"
	printf '#!/bin/sh\necho script-ran\n' >"$SL_TMP/ws-$1/s.sh"
	chmod 755 "$SL_TMP/ws-$1/s.sh"
	sl_sandbox "$1" -- /bin/sh -c '/workspace/s.sh; cat /dev/null'
	echo "$OUT" | grep -qx script-ran || fail "script did not run: $OUT $ERR"
	rec_has '.class=="process.exec" and .executable=="/workspace/s.sh" and .interpreter=="/bin/sh"' ||
		fail "script exec not recorded with its interpreter"
	! rec_has '.class=="sensor.gap" and .gap=="exec-mismatch"' || fail "spurious gap: $(jq -c 'select(.class=="sensor.gap")' "$REC")"
}

for _case in script_exec_verified kernel_addresses dev_tty fastopen signal_mask exec_mismatch fifo host_read write_outside symlink_write connect ptrace_supervisor signal_supervisor \
	see_host_processes mount io_uring userns bpf setns tiocsti; do
	eval "test_${_case}_root() { need_root; esc_${_case} root; expect_verified; }"
	eval "test_${_case}_user() { need_root; esc_${_case} user; expect_verified; }"
done
unset _case

test_workspace_group_never_privileged() {
	need_root
	mkdir -p "$SL_TMP/ws-root"
	chown 1000:shadow "$SL_TMP/ws-root"
	chmod 775 "$SL_TMP/ws-root"
	cp "$SL_PROBES/probe" "$SL_TMP/ws-root/probe"
	printf 'workspace: %s\n' "$SL_TMP/ws-root" >"$SL_TMP/p.yaml"
	set +e
	"$SL_BIN" run --tenant t --agent a --task k --version v --credential-ref r --policy "$SL_TMP/p.yaml" \
		--record-dir "$SL_TMP/rec" --quiet -- /workspace/probe read /etc/shadow >"$SL_TMP/out" 2>&1
	set -e
	grep -qx 'RESULT read EACCES' "$SL_TMP/out" || fail "workspace group leaked into the workload: $(cat "$SL_TMP/out")"
}

/* The seccomp filter: installed last, after Landlock, because it cuts off the syscalls the setup
 * itself needs. Every syscall it refuses goes to the supervisor (SECCOMP_RET_USER_NOTIF), which
 * answers EPERM and records a policy.deny: a refusal nobody hears about is a blind spot. The
 * observed syscalls (exec, open, connect) go there too. libseccomp builds the BPF; we load it with
 * the raw syscall because we need flags libseccomp 2.5 does not know (WAIT_KILLABLE_RECV). */
#include <fcntl.h>
#include <linux/filter.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <termios.h>

#include "common/util.h"
#include "sandbox/kabi.h"
#include "sandbox/sandbox.h"
#include "sensor/syscalls.h"

#define NS_FLAGS                                                                                         \
	(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |          \
	 CLONE_NEWCGROUP | CLONE_NEWTIME)

static int add(scmp_filter_ctx ctx, uint32_t action, int nr, unsigned argc, const struct scmp_arg_cmp *cmp,
	       char *err, size_t errlen)
{
	int r = seccomp_rule_add_array(ctx, action, nr, argc, cmp);
	if (r < 0 && r != -EFAULT /* syscall unknown on this arch */) {
		char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
		snprintf(err, errlen, "seccomp: rule for %s: %s", name ? name : "?", strerror(-r));
		free(name);
		return r;
	}
	return 0;
}

int sl_seccomp_install(bool record_opens, char *err, size_t errlen)
{
	int r;
	int listener = -1;
	_cleanup_close_ int mfd = -1;
	_cleanup_free_ struct sock_filter *insns = NULL;
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx) {
		snprintf(err, errlen, "seccomp: init failed");
		return -ENOMEM;
	}
	/* Other ABIs (i386 via int 0x80, x32) are killed by libseccomp's default bad-arch action, so
	 * nothing can reach the kernel around this filter. */
	size_t n;
	const int *denied = sl_syscalls_denied(&n);
	for (size_t i = 0; i < n; i++)
		if ((r = add(ctx, SCMP_ACT_NOTIFY, denied[i], 0, NULL, err, errlen)) < 0)
			goto out;
	const int observed[] = {SCMP_SYS(execve), SCMP_SYS(execveat), SCMP_SYS(connect)};
	for (size_t i = 0; i < SL_ARRAY_LEN(observed); i++)
		if ((r = add(ctx, SCMP_ACT_NOTIFY, observed[i], 0, NULL, err, errlen)) < 0)
			goto out;
	if (record_opens) {
		const int opens[] = {SCMP_SYS(open), SCMP_SYS(openat), SCMP_SYS(openat2), SCMP_SYS(creat)};
		for (size_t i = 0; i < SL_ARRAY_LEN(opens); i++)
			if ((r = add(ctx, SCMP_ACT_NOTIFY, opens[i], 0, NULL, err, errlen)) < 0)
				goto out;
	}
	/* New namespaces (user namespaces above all: they re-open the kernel's privileged surface)
	 * are refused, whichever bit asks for them. */
	for (unsigned bit = 0; bit < 64; bit++) {
		uint64_t f = 1ULL << bit;
		if (!(f & NS_FLAGS))
			continue;
		struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, f, f);
		if ((r = add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(clone), 1, &c, err, errlen)) < 0 ||
		    (r = add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(unshare), 1, &c, err, errlen)) < 0)
			goto out;
	}
	/* clone3 passes its flags in memory a filter cannot read: ENOSYS makes libc fall back to
	 * clone(2), whose flags the rules above can see. Not a deny, a redirect: not recorded. */
	if ((r = add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0, NULL, err, errlen)) < 0)
		goto out;
	/* TIOCSTI/TIOCLINUX push keystrokes into a terminal the host shell reads from. */
	const unsigned long ttyops[] = {TIOCSTI, TIOCLINUX};
	for (size_t i = 0; i < SL_ARRAY_LEN(ttyops); i++) {
		struct scmp_arg_cmp c = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, ttyops[i]);
		if ((r = add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(ioctl), 1, &c, err, errlen)) < 0)
			goto out;
	}

	/* MSG_FASTOPEN connects as it sends: refused (and Fast Open is off in the namespace). */
	struct scmp_arg_cmp fo2 = SCMP_A2(SCMP_CMP_MASKED_EQ, MSG_FASTOPEN, MSG_FASTOPEN);
	struct scmp_arg_cmp fo3 = SCMP_A3(SCMP_CMP_MASKED_EQ, MSG_FASTOPEN, MSG_FASTOPEN);
	if ((r = add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(sendto), 1, &fo3, err, errlen)) < 0 ||
	    (r = add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(sendmsg), 1, &fo2, err, errlen)) < 0 ||
	    (r = add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(sendmmsg), 1, &fo3, err, errlen)) < 0)
		goto out;

	mfd = memfd_create("sl-bpf", MFD_CLOEXEC);
	if (mfd < 0) {
		r = -errno;
		snprintf(err, errlen, "seccomp: memfd: %s", strerror(errno));
		goto out;
	}
	if ((r = seccomp_export_bpf(ctx, mfd)) < 0) {
		snprintf(err, errlen, "seccomp: export: %s", strerror(-r));
		goto out;
	}
	off_t len = lseek(mfd, 0, SEEK_END);
	if (len <= 0 || len % sizeof(struct sock_filter) || len > 65536 * (off_t)sizeof(struct sock_filter)) {
		r = -EINVAL;
		snprintf(err, errlen, "seccomp: exported filter has bad size %lld", (long long)len);
		goto out;
	}
	insns = malloc((size_t)len);
	if (!insns || pread(mfd, insns, (size_t)len, 0) != len) {
		r = -EIO;
		snprintf(err, errlen, "seccomp: read back filter");
		goto out;
	}
	struct sock_fprog prog = {.len = (unsigned short)(len / sizeof(struct sock_filter)), .filter = insns};
	/* NEW_LISTENER: the refusals and observations go to the supervisor.
	 * WAIT_KILLABLE_RECV: once the supervisor has received a notification, only a fatal signal
	 * interrupts the waiting task, so a signal cannot make the syscall restart and be recorded
	 * twice, while a kill (stop path) still gets through. */
	listener = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
				SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, &prog);
	if (listener < 0) {
		r = -errno;
		snprintf(err, errlen, "seccomp: load filter with listener: %s", strerror(errno));
		goto out;
	}
	r = listener;
out:
	seccomp_release(ctx);
	return r;
}

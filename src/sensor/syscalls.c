#include "sensor/syscalls.h"

#include <seccomp.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>

#include "common/util.h"

/* Each entry: why a sandboxed agent never needs it, and what it would open up. */
static const int denied[] = {
	SYS_ptrace,		/* inspect/modify other processes: the classic way to the supervisor */
	SYS_process_vm_readv,	/* same, without ptrace */
	SYS_process_vm_writev,
	SYS_kcmp,		/* probes other processes' kernel objects */
	SYS_pidfd_getfd,	/* steals fds from other processes */
	SYS_bpf,		/* kernel programs */
	SYS_perf_event_open,	/* kernel/hardware observation, side channels */
	SYS_mount,		/* the mount family: could rebuild the view the policy removed */
	SYS_umount2,
	SYS_pivot_root,
	SYS_chroot,
	SYS_move_mount,
	SYS_open_tree,
	SYS_fsopen,
	SYS_fsconfig,
	SYS_fsmount,
	SYS_fspick,
	SYS_mount_setattr,
	SYS_setns,		/* join another namespace */
	SYS_keyctl,		/* kernel keyrings are not namespaced */
	SYS_add_key,
	SYS_request_key,
	SYS_io_uring_setup,	/* io_uring does file and network I/O without syscalls the sensor sees */
	SYS_io_uring_enter,
	SYS_io_uring_register,
	SYS_userfaultfd,	/* stalls kernel copies at will: a race amplifier for kernel exploits */
	SYS_init_module,	/* kernel modules */
	SYS_finit_module,
	SYS_delete_module,
	SYS_kexec_load,
	SYS_kexec_file_load,
	SYS_reboot,
	SYS_swapon,
	SYS_swapoff,
	SYS_acct,
	SYS_settimeofday,	/* the clock is not namespaced */
	SYS_clock_settime,
	SYS_clock_adjtime,
	SYS_adjtimex,
	SYS_syslog,		/* kernel log: host information */
	SYS_open_by_handle_at,	/* opens by inode handle, around the mount view (the shocker escape) */
	SYS_name_to_handle_at,
	SYS_fanotify_init,	/* watch the host's file activity */
	SYS_quotactl,
	SYS_lookup_dcookie,
	SYS_iopl,
	SYS_ioperm,
	SYS_vhangup,
	SYS_uselib,
};

const int *sl_syscalls_denied(size_t *n)
{
	*n = SL_ARRAY_LEN(denied);
	return denied;
}

bool sl_syscall_is_denied(int nr)
{
	for (size_t i = 0; i < SL_ARRAY_LEN(denied); i++)
		if (denied[i] == nr)
			return true;
	return false;
}

const char *sl_syscall_name(int nr)
{
	static __thread char buf[40];
	char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
	if (!name)
		return "?";
	snprintf(buf, sizeof(buf), "%s", name);
	free(name);
	return buf;
}

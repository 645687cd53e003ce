/* Kernel ABI this project needs that Debian 12's linux-libc-dev (6.1) does not define yet.
 * Values are the kernel's UAPI; each use probes at run time and degrades loudly. */
#ifndef SL_KABI_H
#define SL_KABI_H
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <stdint.h>

/* Landlock ABI 4 (net), 5 (ioctl_dev), 6 (scoping). */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#define SL_LANDLOCK_ACCESS_NET_BIND_TCP	   (1ULL << 0)
#define SL_LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#define SL_LANDLOCK_RULE_NET_PORT	   2
#define SL_LANDLOCK_SCOPE_ABSTRACT_UNIX	   (1ULL << 0)
#define SL_LANDLOCK_SCOPE_SIGNAL	   (1ULL << 1)

struct sl_landlock_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};
struct sl_landlock_net_port_attr {
	uint64_t allowed_access;
	uint64_t port;
} __attribute__((packed));

/* seccomp user-notification extras (kernel >= 6.6). */
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

/* pidfd for a thread (kernel >= 6.9). */
#ifndef PIDFD_THREAD
#define PIDFD_THREAD 00000200 /* O_EXCL */
#endif
#endif

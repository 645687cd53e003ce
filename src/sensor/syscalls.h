/* The syscalls the sandbox refuses outright (answered EPERM by the supervisor, recorded as
 * policy.deny with layer "seccomp"), with why each one is refused. */
#ifndef SL_SYSCALLS_H
#define SL_SYSCALLS_H
#include <stdbool.h>
#include <stddef.h>

const int *sl_syscalls_denied(size_t *n);
bool sl_syscall_is_denied(int nr);
/* Name of a syscall number on this architecture ("?" if unknown); static storage. */
const char *sl_syscall_name(int nr);
#endif

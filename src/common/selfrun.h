/* Running this binary as a helper child in a scratch directory: what the collector's scheduled
 * canary (collector/canary.c) and the contract validator (contract/validate.c) both do (write the
 * policy and files a run reads, start `sightline ...` from /proc/self/exe, remove the directory). */
#ifndef SL_COMMON_SELFRUN_H
#define SL_COMMON_SELFRUN_H
#include <sys/types.h>

/* Create path (never through a symlink) with mode and write text to it. oflags adds O_EXCL (the
 * file must be new) or O_TRUNC (replace its content). Returns 0 or -errno. */
int sl_write_text(const char *path, const char *text, int oflags, mode_t mode);

/* Start /proc/self/exe with argv: stdin from /dev/null, stdout and stderr into the files out and
 * err (created 0600, truncated), or /dev/null where NULL; every signal unblocked in the child.
 * Sets *pid. Returns 0 or -errno. */
int sl_selfrun_spawn(char *const argv[], const char *out, const char *err, pid_t *pid);

/* Remove dir and everything below it, without following symlinks; what cannot be removed stays. */
void sl_rm_tree(const char *dir);
#endif

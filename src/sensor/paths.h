#ifndef SL_PATHS_H
#define SL_PATHS_H
#include <stdbool.h>

#include "policy/policy.h"

/* path equals root or lies beneath it ("/" contains everything). */
bool sl_path_under(const char *path, const char *root);
/* Lexical normalisation of an absolute path in place: "//", "." and ".." folded, never above "/".
 * Used for the policy pre-check; the open itself resolves the original string as the kernel would. */
void sl_path_normalize(char *p);
/* The policy's view: readable = the read-only paths, the workspace, /tmp, /dev, /proc and "/"
 * itself; writable = the workspace, /tmp, /dev/shm and the harmless device nodes. */
bool sl_path_readable(const struct sl_policy *p, const char *path);
bool sl_path_writable(const struct sl_policy *p, const char *path);
bool sl_path_is_canary(const struct sl_policy *p, const char *path);
#endif

/* Metadata over content: argv values that look like secrets are replaced before they are
 * recorded. */
#ifndef SL_REDACT_H
#define SL_REDACT_H
#include <stdbool.h>
#include <stddef.h>

#define SL_REDACTED "[REDACTED]"
/* Decide how to record one argument. prev is the previous argument (or NULL): "--token X"
 * redacts X. Returns true if arg must be replaced by SL_REDACTED entirely; when arg has the form
 * KEY=VALUE or KEY:VALUE with a secret-looking key, *keep is set to the length of the prefix to
 * keep (KEY=) and true is returned as well. *keep == 0 means replace all. */
bool sl_redact_arg(const char *prev, const char *arg, size_t *keep);
#endif

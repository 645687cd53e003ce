/* The fields of the classes that the runtime-independent part of `sightline run` writes the same
 * way for every runtime: control.action and export.blind/export.restored (cli/supervise.c), and
 * record.end (the record writer). Each runtime's table (caps_native.c, caps_gvisor.c) points here,
 * so a field added to one of those writers is added for all runtimes at once. */
#include <stddef.h>

#include "contract/caps.h"

const char *const sl_caps_f_control[] = {"action",	   "by",   "peer_uid", "peer_pid", "reason",
					 "credential_ref", "ocsf", NULL};
/* export.blind / export.restored: the supervisor's own watch on the collector (cli/supervise.c). */
const char *const sl_caps_f_blind[] = {"detected_ns",  "last_ack_ns", "last_ack_seq", "backlog",
				       "max_blind_ms", "risk_class",  "collector",    NULL};
const char *const sl_caps_f_restored[] = {"restored_ns", "blind_since_ns", "ack_seq", "backlog", NULL};
const char *const sl_caps_f_end[] = {"counts", NULL};

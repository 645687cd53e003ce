/* Mapping of decoded gVisor points (gvisor_wire.h) to sightline's event classes (docs/events.md,
 * docs/gvisor.md has the table). Pure: no I/O, no state; the sink owns counting and appending. */
#ifndef SL_GVISOR_MAP_H
#define SL_GVISOR_MAP_H
#include "common/json.h"
#include "policy/policy.h"
#include "sensor/gvisor_wire.h"

struct sl_gv_map_cfg {
	const char *container_id;	/* the container id sightline gave runsc for this sandbox */
	const struct sl_policy *policy; /* canaries; may be NULL */
};

/* Map m. Returns 1 with the class in *cls and its body in j; 2 when, in addition, a
 * policy.deny body was written into deny (an open refused with EROFS/EACCES/EPERM); 0 when the
 * point gives no event of its own (enter points, thread exits, exec syscall exits: the caller
 * counts them); -EXDEV when the point does not carry this sandbox's container id (it is never
 * attributed to this or any other sandbox: the caller records a gap). */
int sl_gv_map(const struct sl_gv_msg *m, const struct sl_gv_map_cfg *cfg, struct sl_json *j, const char **cls,
	      struct sl_json *deny);
#endif

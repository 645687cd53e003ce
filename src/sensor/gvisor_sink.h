/* The gVisor sink: the supervisor's end of the Sentry's runtime-monitoring stream. One per
 * sandbox, outside the sandbox: an AF_UNIX SOCK_SEQPACKET listener in the sandbox's private
 * directory (0700, never mounted into the sandbox), the handshake, then one datagram per point,
 * decoded (gvisor_wire.h), mapped (gvisor_map.h) and appended to the sandbox's record.
 *
 * Identity: the record, the identity and the container id are the launcher's; whatever connects
 * to this socket speaks for this sandbox only, and a point naming another container is a gap,
 * never another sandbox's event. Loss: every increase of the header's dropped_count becomes a
 * sensor.gap with the count. Hostile input: every rejected datagram is counted by reason, the
 * first of each reason per connection is a sensor.gap at once, the rest are summed at the end. */
#ifndef SL_GVISOR_SINK_H
#define SL_GVISOR_SINK_H
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "policy/policy.h"
#include "record/record.h"
#include "sensor/gvisor_wire.h"

#define SL_GV_SINK_MAX_CONN 8
#define SL_GV_SINK_RCVBUF   (300 * 1024)
#define SL_GV_SINK_MSG_MAX  (512 * 1024) /* larger datagrams are cut by the kernel: rejected */

struct sl_gv_sink_counts {
	atomic_uint_fast64_t datagrams, events, connections, handshakes, dropped, gaps, foreign;
	atomic_uint_fast64_t rejected[SL_GV_R_COUNT];
	atomic_uint_fast64_t no_event; /* valid points that give no event (enter points, thread exits) */
	atomic_uint_fast64_t exec_failed, connect_enter, starts;
	atomic_uint_fast64_t deny; /* policy.deny lines written (EROFS/EACCES/EPERM opens) */
	atomic_uint_fast64_t open, exec, connect;
};

struct sl_gv_sink {
	/* set by the caller before sl_gv_sink_start */
	struct sl_record *rec;
	const char *container_id; /* copied */
	const struct sl_policy *policy;
	void (*on_fatal)(void *arg); /* the record failed: stop the sandbox (fail closed) */
	void *fatal_arg;
	/* owned */
	char path[PATH_MAX];
	char cid[SL_GV_ID_MAX + 1];
	int lfd;
	int stop_pipe[2];
	pthread_t thread;
	bool running;
	struct sl_gv_sink_counts c;
	atomic_int fatal;
	atomic_bool stopping;
};

/* Bind and listen at path (removed first; created 0600; its directory must be private). Returns
 * 0 or -errno. */
int sl_gv_sink_listen(struct sl_gv_sink *s, const char *path);
/* Start the receiving thread. Returns 0 or -errno. */
int sl_gv_sink_start(struct sl_gv_sink *s);
/* Stop: wait up to linger_ms for the connections still open to reach EOF (the Sentry's last
 * points), then join, write the end-of-stream gaps (rejections, no container start), close and
 * unlink the socket. */
void sl_gv_sink_stop(struct sl_gv_sink *s, unsigned linger_ms);
/* Write the sink's counters as members of j (for record.end). */
struct sl_json;
void sl_gv_sink_counts_json(struct sl_gv_sink *s, struct sl_json *j);
#endif

/* Shipping a sandbox's record to the collector. The record file is the buffer: the exporter reads
 * it (never the workload's memory, never a second copy), sends its lines in order over an
 * authenticated connection (src/export/frame.h), and remembers only what the collector has
 * acknowledged as durable. When the collector is unreachable the sandbox keeps recording; the
 * exporter reconnects with backoff and resumes after the collector's last durable seq. Nothing
 * unacknowledged is ever discarded: it stays in the record. */
#ifndef SL_EXPORTER_H
#define SL_EXPORTER_H
#include <stdbool.h>
#include <stdint.h>

#include "export/frame.h"
#include "record/record.h"

struct sl_exporter_cfg {
	const char *addr;	 /* "unix:/path" or "tcp:127.0.0.1:PORT" (loopback only) */
	const char *record_path; /* the sandbox's record, being appended to */
	const char *sandbox_id;
	struct sl_identity id;
	const char *risk_class; /* "high", "medium" or "low" */
	const char *control;	/* the supervisor's control socket path */
	uint8_t key[SL_FRAME_KEY_LEN];
	unsigned heartbeat_ms; /* default 1000 */
	/* Events the sensor emitted but could not record (the heartbeat's "dropped"); called from the
	 * exporter thread, must be thread-safe. NULL: 0. */
	uint64_t (*dropped)(void *arg);
	void *dropped_arg;
	/* Check each line's own hash and its link to the line before as it is read for sending
	 * (sl_chain_walk), and ship only the good lines before the first bad one (sightline export of
	 * a finished record). The collector re-checks every line anyway; this makes a damaged record
	 * an error at the sender, with its good prefix delivered, instead of a resend loop. A line
	 * the collector refuses (ERROR protocol) also ends the export there. Off for a live run: the
	 * supervisor wrote the record itself. */
	bool check_chain;
};

struct sl_exporter_stats {
	uint64_t recorded;	/* complete lines seen in the record */
	uint64_t exported;	/* highest seq sent */
	uint64_t acked;		/* highest seq the collector says is durable */
	uint64_t connects;	/* successful connections (1 + reconnects) */
	uint64_t send_failures; /* connections lost or refused */
	int64_t last_answer_ns; /* monotonic time the collector last acknowledged anything */
	/* The collector's last ERROR frame (0 and "" if none): e.g. SL_FRAME_ERR_REVOKED when it
	 * refused to bind this sandbox because its credential reference is revoked. */
	uint16_t error_code;
	char error_msg[SL_FRAME_ERROR_MSG_MAX + 1];
};

struct sl_exporter;

/* Start the exporter thread. cfg is copied (the key too; wipe yours). Returns 0 or -errno. */
int sl_exporter_start(const struct sl_exporter_cfg *cfg, struct sl_exporter **out);
/* The record is complete (record.end written): ship the rest, wait up to timeout_ms for every line
 * to be acknowledged, stop the thread, free. st gets the final counts. Returns 0 when everything
 * was acknowledged, -ETIMEDOUT when not (the record keeps it), -EBADMSG (check_chain) when a bad
 * line stopped the export after every good line before it was acknowledged, -errno otherwise. */
int sl_exporter_finish(struct sl_exporter *e, unsigned timeout_ms, struct sl_exporter_stats *st);
/* A snapshot of the counters (thread-safe). */
void sl_exporter_stats(struct sl_exporter *e, struct sl_exporter_stats *st);

/* Resolve "unix:/path" / "tcp:127.0.0.1:PORT" into a sockaddr. tcp must be a loopback address.
 * Returns the address length or -EINVAL. */
struct sockaddr_storage;
int sl_addr_parse(const char *addr, struct sockaddr_storage *ss);
#endif

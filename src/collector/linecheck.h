/* The collector's line checker thread: the second stage of the ingest pipeline. The event loop
 * (network, frame HMAC, protocol state, SQLite, ACKs) hands each authenticated EVENTS payload to
 * this thread, which re-validates every line (sl_line_check: shape, strict JSON, own hash) and that
 * it names the connection's sandbox, and turns the good prefix into store events; the loop then
 * stores them and acknowledges. So the two CPU-heavy halves of ingest run on two cores. Batches
 * come back in the order they were submitted (one checker thread, FIFO queues), which keeps each
 * connection's frames, and so each sandbox's chain, in order.
 *
 * Threads: sl_linecheck_* are called from one thread (the event loop); the checker thread touches
 * only the batches it has been handed. */
#ifndef SL_COLLECTOR_LINECHECK_H
#define SL_COLLECTOR_LINECHECK_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/store.h"
#include "export/frame.h"

/* Batches in flight at once (each holds a copy of one payload, at most SL_FRAME_MAX_PAYLOAD). */
#define SL_LINECHECK_MAX_BATCHES 4

struct sl_checked_batch {
	/* in: set by the caller before sl_linecheck_submit */
	void *owner;				      /* the caller's: the connection */
	char sandbox_id[SL_FRAME_SANDBOX_ID_LEN + 1]; /* lines must name this sandbox */
	uint8_t *payload; /* an EVENTS payload (the decoder checked its framing) */
	size_t payload_len;
	uint32_t count; /* its event count */
	/* out: the lines that checked out, in order, up to the first that did not */
	struct sl_store_event *ev; /* views into payload */
	size_t n;
	bool ended;	    /* a record.end line is among them */
	const char *reject; /* NULL, or the reject reason of the line that stopped the batch */
	const char *bad;    /* and what to tell the sender */
	/* private */
	size_t payload_cap, ev_cap;
	struct sl_checked_batch *next;
};

struct sl_linecheck;

/* Start the checker thread (all signals blocked). *efd: an eventfd that becomes readable when
 * a batch is done (read it, then sl_linecheck_done until NULL). Returns 0 or -errno. */
int sl_linecheck_start(struct sl_linecheck **out, int *efd);
/* Stop and join the thread and free every batch. Batches not yet returned are dropped. NULL ok. */
void sl_linecheck_stop(struct sl_linecheck *lc);
/* A free batch with room for payload_len bytes and count events, or NULL: -ENOMEM in *err, or
 * -EBUSY when SL_LINECHECK_MAX_BATCHES are in flight (take a done one back first). */
struct sl_checked_batch *sl_linecheck_get(struct sl_linecheck *lc, size_t payload_len, uint32_t count,
					  int *err);
/* Queue b (from sl_linecheck_get, payload filled) for checking. */
void sl_linecheck_submit(struct sl_linecheck *lc, struct sl_checked_batch *b);
/* The oldest checked batch, or NULL if none is done (wait: block until one is, if any is in flight). */
struct sl_checked_batch *sl_linecheck_done(struct sl_linecheck *lc, bool wait);
/* Give a batch from sl_linecheck_done back. */
void sl_linecheck_put(struct sl_linecheck *lc, struct sl_checked_batch *b);
/* Batches submitted and not yet taken back with sl_linecheck_done. */
unsigned sl_linecheck_in_flight(const struct sl_linecheck *lc);
#endif

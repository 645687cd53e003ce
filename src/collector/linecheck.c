/* The collector's line checker thread: see linecheck.h. */
#include "collector/linecheck.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "record/json_scan.h"
#include "record/record.h"

struct queue {
	struct sl_checked_batch *head, *tail;
};

struct sl_linecheck {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t work_cv, done_cv;
	struct queue todo, done;
	struct sl_checked_batch *free_list;
	unsigned allocated, in_flight;
	bool stop;
	int efd;
	struct sl_line_checker *chk; /* the thread's */
};

static void q_push(struct queue *q, struct sl_checked_batch *b)
{
	b->next = NULL;
	if (q->tail)
		q->tail->next = b;
	else
		q->head = b;
	q->tail = b;
}

static struct sl_checked_batch *q_pop(struct queue *q)
{
	struct sl_checked_batch *b = q->head;
	if (b) {
		q->head = b->next;
		if (!q->head)
			q->tail = NULL;
		b->next = NULL;
	}
	return b;
}

/* Could a built-in detection (sl_detect_line) fire on the line just checked? From its parsed
 * top-level members, which are the ones the detections read (json-c's view of them is the same:
 * the scanner refuses duplicate top-level keys): file.open with "canary": true, or policy.deny
 * whose "syscall" is the string "connect" (or any escaped string: json-c would decode it). A
 * superset of what fires, so detect() skips only lines where nothing can. */
static bool detection_candidate(const struct sl_line_checker *chk, const char *cls)
{
	if (!strcmp(cls, "file.open")) {
		const struct sl_jscan_member *m = sl_line_checker_member(chk, "canary", 6);
		return m && m->type == SL_JSCAN_TRUE;
	}
	if (!strcmp(cls, "policy.deny")) {
		const struct sl_jscan_member *m = sl_line_checker_member(chk, "syscall", 7);
		return m && m->type == SL_JSCAN_STRING &&
		       (m->escaped || (m->val_len == 7 && !memcmp(m->val, "connect", 7)));
	}
	return false;
}

/* Check b's lines in order; stop at the first that does not check out. */
static void check_batch(struct sl_line_checker *chk, struct sl_checked_batch *b)
{
	struct sl_frame f = {.type = SL_FRAME_EVENTS,
			     .payload = b->payload,
			     .payload_len = (uint32_t)b->payload_len,
			     .event_count = b->count};
	struct sl_frame_events_iter it;
	sl_frame_events_begin(&f, &it);
	const uint8_t *line;
	size_t len;
	struct sl_line_info info;
	b->n = 0;
	b->ended = false;
	b->reject = b->bad = NULL;
	while (b->n < b->ev_cap && sl_frame_events_next(&it, &line, &len)) {
		const char *why;
		if (sl_line_check(chk, (const char *)line, len, &info, &why) < 0) {
			b->reject = "bad_line";
			b->bad = "a line does not check out";
			return;
		}
		if (strcmp(info.sandbox_id, b->sandbox_id) != 0) {
			/* Authenticated by this sandbox's key, but naming another: never stored. */
			b->reject = "other_sandbox";
			b->bad = "a line names another sandbox";
			return;
		}
		/* Views into the payload. sl_line_check fixed the shape: the line starts with
		 * {"seq":N,"sandbox_id":"<32>","time":T,"class":"C", and ends with
		 * ,"prev_hash":"<64>","hash":"<64>"} */
		size_t cl = strlen(info.cls);
		const char *cls = memmem(line, len, "\"class\":\"", 9);
		const char *hash = (const char *)line + len - 2 - 64;
		const char *prev = hash - (sizeof("\",\"hash\":\"") - 1) - 64;
		b->ev[b->n++] = (struct sl_store_event){.seq = info.seq,
							.time_ns = info.time_ns,
							.class_name = cls + 9,
							.class_len = cl,
							.prev_hash = prev,
							.hash = hash,
							.line = (const char *)line,
							.line_len = len};
		b->ev[b->n - 1].no_detection = !detection_candidate(chk, info.cls);
		if (!strcmp(info.cls, "record.end"))
			b->ended = true;
	}
}

static void *checker_main(void *arg)
{
	struct sl_linecheck *lc = arg;
	pthread_mutex_lock(&lc->mu);
	for (;;) {
		while (!lc->todo.head && !lc->stop)
			pthread_cond_wait(&lc->work_cv, &lc->mu);
		if (lc->stop)
			break;
		struct sl_checked_batch *b = q_pop(&lc->todo);
		pthread_mutex_unlock(&lc->mu);
		check_batch(lc->chk, b);
		pthread_mutex_lock(&lc->mu);
		q_push(&lc->done, b);
		pthread_cond_signal(&lc->done_cv);
		uint64_t one = 1;
		(void)!write(lc->efd, &one, sizeof(one));
	}
	pthread_mutex_unlock(&lc->mu);
	return NULL;
}

static void batch_free(struct sl_checked_batch *b)
{
	if (!b)
		return;
	free(b->payload);
	free(b->ev);
	free(b);
}

int sl_linecheck_start(struct sl_linecheck **out, int *efd)
{
	struct sl_linecheck *lc = calloc(1, sizeof(*lc));
	if (!lc)
		return -ENOMEM;
	int r = sl_line_checker_new(&lc->chk);
	if (r < 0) {
		free(lc);
		return r;
	}
	lc->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (lc->efd < 0) {
		r = -errno;
		sl_line_checker_free(lc->chk);
		free(lc);
		return r;
	}
	pthread_mutex_init(&lc->mu, NULL);
	pthread_cond_init(&lc->work_cv, NULL);
	pthread_cond_init(&lc->done_cv, NULL);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread takes no signals */
	r = -pthread_create(&lc->thread, NULL, checker_main, lc);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0) {
		close(lc->efd);
		sl_line_checker_free(lc->chk);
		free(lc);
		return r;
	}
	*efd = lc->efd;
	*out = lc;
	return 0;
}

void sl_linecheck_stop(struct sl_linecheck *lc)
{
	if (!lc)
		return;
	pthread_mutex_lock(&lc->mu);
	lc->stop = true;
	pthread_cond_signal(&lc->work_cv);
	pthread_mutex_unlock(&lc->mu);
	pthread_join(lc->thread, NULL);
	struct sl_checked_batch *b;
	while ((b = q_pop(&lc->todo)))
		batch_free(b);
	while ((b = q_pop(&lc->done)))
		batch_free(b);
	while ((b = lc->free_list)) {
		lc->free_list = b->next;
		batch_free(b);
	}
	close(lc->efd);
	sl_line_checker_free(lc->chk);
	pthread_cond_destroy(&lc->work_cv);
	pthread_cond_destroy(&lc->done_cv);
	pthread_mutex_destroy(&lc->mu);
	free(lc);
}

struct sl_checked_batch *sl_linecheck_get(struct sl_linecheck *lc, size_t payload_len, uint32_t count,
					  int *err)
{
	struct sl_checked_batch *b = lc->free_list; /* only this thread touches the free list */
	if (b) {
		lc->free_list = b->next;
	} else if (lc->allocated < SL_LINECHECK_MAX_BATCHES) {
		b = calloc(1, sizeof(*b));
		if (!b) {
			*err = -ENOMEM;
			return NULL;
		}
		lc->allocated++;
	} else {
		*err = -EBUSY;
		return NULL;
	}
	if (b->payload_cap < payload_len) {
		uint8_t *p = realloc(b->payload, payload_len);
		if (!p)
			goto nomem;
		b->payload = p;
		b->payload_cap = payload_len;
	}
	if (b->ev_cap < count) {
		struct sl_store_event *ev = realloc(b->ev, count * sizeof(*ev));
		if (!ev)
			goto nomem;
		b->ev = ev;
		b->ev_cap = count;
	}
	b->payload_len = payload_len;
	b->count = count;
	return b;
nomem:
	b->next = lc->free_list;
	lc->free_list = b;
	*err = -ENOMEM;
	return NULL;
}

void sl_linecheck_submit(struct sl_linecheck *lc, struct sl_checked_batch *b)
{
	pthread_mutex_lock(&lc->mu);
	q_push(&lc->todo, b);
	lc->in_flight++;
	pthread_cond_signal(&lc->work_cv);
	pthread_mutex_unlock(&lc->mu);
}

struct sl_checked_batch *sl_linecheck_done(struct sl_linecheck *lc, bool wait)
{
	pthread_mutex_lock(&lc->mu);
	while (wait && !lc->done.head && lc->in_flight)
		pthread_cond_wait(&lc->done_cv, &lc->mu);
	struct sl_checked_batch *b = q_pop(&lc->done);
	if (b)
		lc->in_flight--;
	pthread_mutex_unlock(&lc->mu);
	return b;
}

void sl_linecheck_put(struct sl_linecheck *lc, struct sl_checked_batch *b)
{
	b->owner = NULL;
	b->next = lc->free_list;
	lc->free_list = b;
}

unsigned sl_linecheck_in_flight(const struct sl_linecheck *lc)
{
	return lc->in_flight; /* written under mu by this (the caller's) thread only */
}

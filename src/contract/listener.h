/* The validator's listener: a trusted socket inside a sandbox's network namespace that records
 * anything that arrives (the control check of `sightline validate`). */
#ifndef SL_CONTRACT_LISTENER_H
#define SL_CONTRACT_LISTENER_H
#include <stdint.h>
#include <sys/types.h>

struct sl_canary_listener;

/* Start a thread that joins the network namespace of process pid (setns on that thread only: the
 * supervisor's other threads stay where they are), listens on 127.0.0.1:port and appends one line
 * per event to log_path (created 0600, truncated): "listening 127.0.0.1:PORT", then per connection
 * "connection from ADDR:PORT" and "received N bytes". Returns 0 once the socket is bound and
 * listening, or -errno (nothing left running). */
int sl_canary_listener_start(pid_t pid, uint16_t port, const char *log_path, struct sl_canary_listener **out);
/* Stop the thread, close everything, free. NULL ok. */
void sl_canary_listener_stop(struct sl_canary_listener *l);
#endif

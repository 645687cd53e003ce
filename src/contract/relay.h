/* A unix-socket relay the validator controls: it sits between a supervisor's exporter and the
 * collector so the validator can cut the export path (and restore it) without touching either. */
#ifndef SL_CONTRACT_RELAY_H
#define SL_CONTRACT_RELAY_H
struct sl_relay;
/* Listen on listen_path, forward every connection to target_path. Returns 0 or -errno. */
int sl_relay_start(const char *listen_path, const char *target_path, struct sl_relay **out);
/* Cut: close every relayed connection and stop listening (connects fail). */
int sl_relay_cut(struct sl_relay *r);
/* Restore: listen again. */
int sl_relay_restore(struct sl_relay *r);
/* Stop the thread and free. NULL ok. */
void sl_relay_stop(struct sl_relay *r);
#endif

/* Shared between the validator's run (validate.c) and its checks (validate_checks.c). */
#ifndef SL_CONTRACT_VALIDATE_INTERNAL_H
#define SL_CONTRACT_VALIDATE_INTERNAL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "contract/validate.h"

struct sl_vctx {
	const struct sl_validate_cfg *cfg;
	struct sl_validate_result *res;
	char db[128], admin[128], listener_log[128], run_out[128];
	char record[512];
	char content[40];
	uint64_t max_blind_ms;
	int response;
	pid_t run_pid;
	int run_status;
	bool run_exited, running_at_close;
	bool gvisor; /* the runtime is gVisor: the workload polls for files instead of a FIFO */
	int64_t cut_ns, restore_ns, gate_closed_ns, blind_since_ns;
	char gate_answer[256];
};

void sl_vrow_add(struct sl_validate_result *res, bool control, int verdict, const char *check,
		 const char *subject, const char *expected, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
int sl_vask(const char *sock, const char *req, char *resp, size_t len);
bool sl_vfile_has(const char *path, const char *needle);
/* The one record file in dir: its path and sandbox id. Returns 0 or -ENOENT. */
int sl_vfind_record(const char *dir, char *path, size_t len, char sandbox_id[33]);
/* Stored head seq of the validator's sandbox (0 if none yet). */
size_t sl_vstored(const struct sl_vctx *v);
/* Every check over the collector's store, the record, the listener's log. Returns 0 or -errno
 * when the evidence could not be read at all. */
int sl_vchecks(struct sl_vctx *v, char *err, size_t errlen);
#endif

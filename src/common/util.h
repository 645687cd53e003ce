/* Small shared helpers: cleanup attributes, errno-returning I/O, time. Library code returns
 * negative errno and never logs; only src/cli/ prints and exits. */
#ifndef SL_UTIL_H
#define SL_UTIL_H
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define SL_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static inline void sl_freep(void *p)
{
	free(*(void **)p);
}
static inline void sl_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}
#define _cleanup_free_	__attribute__((cleanup(sl_freep)))
#define _cleanup_close_ __attribute__((cleanup(sl_closep)))

/* Hand ownership of an fd/pointer out of a cleanup-scoped variable. */
static inline int sl_steal_fd(int *fd)
{
	int r = *fd;
	*fd = -1;
	return r;
}
static inline void *sl_steal_ptr(void *pp)
{
	void **p = pp;
	void *r = *p;
	*p = NULL;
	return r;
}

/* Start-up profiling: with SIGHTLINE_TIMING=1 in the environment, prints "phase +N us" to
 * stderr at each call (the program's edge uses it; library code calls it only for timing). */
void sl_timing(const char *phase);

/* Realtime and monotonic clocks in nanoseconds. */
int64_t sl_now_realtime_ns(void);
int64_t sl_now_monotonic_ns(void);

/* Write all of buf, retrying on EINTR/short writes. Returns 0 or -errno. */
int sl_write_all(int fd, const void *buf, size_t len);
/* Read up to len bytes, retrying on EINTR, until EOF or len. Returns bytes read or -errno. */
ssize_t sl_read_full(int fd, void *buf, size_t len);
/* Read a whole (small) file into a NUL-terminated heap buffer, at most max bytes. Returns 0 or -errno
 * (-EFBIG if larger than max). */
int sl_read_file(const char *path, size_t max, char **out, size_t *out_len);
/* Write a file durably: write to PATH.tmp, fsync, rename, fsync the directory. Returns 0 or -errno. */
int sl_write_file_durable(const char *path, const void *buf, size_t len, mode_t mode);
/* mkdir -p with mode for created components. Returns 0 or -errno. */
int sl_mkdir_p(const char *path, mode_t mode);
/* 128 random bits from getrandom(2) as 32 lowercase hex chars + NUL. Returns 0 or -errno. */
int sl_random_id(char out[33]);
/* Lowercase hex of len bytes into out (2*len+1). */
void sl_hex(const unsigned char *in, size_t len, char *out);
#endif
